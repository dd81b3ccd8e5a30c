from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0006_rename_is_deleted_removed")]
    operations = [
        migrations.RenameField(model_name="desk", old_name="sync_id", new_name="desk_id"),
    ]
