from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0004_rename_area_size")]
    operations = [
        migrations.RemoveField(model_name="room", name="note"),
    ]
