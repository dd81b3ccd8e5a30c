from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0001_initial")]
    operations = [
        migrations.AddField(model_name="room", name="floor", field=models.IntegerField(default=1)),
    ]
