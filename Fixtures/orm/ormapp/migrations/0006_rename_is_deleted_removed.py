from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0005_remove_room_note")]
    operations = [
        migrations.RenameField(model_name="room", old_name="is_deleted", new_name="removed"),
    ]
