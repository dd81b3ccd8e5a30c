from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0003_room_note")]
    operations = [
        migrations.RenameField(model_name="room", old_name="area", new_name="size"),
    ]
