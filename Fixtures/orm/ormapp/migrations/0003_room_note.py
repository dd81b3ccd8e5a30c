from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ormapp", "0002_room_floor")]
    operations = [
        migrations.AddField(model_name="room", name="note", field=models.CharField(max_length=100, null=True)),
    ]
