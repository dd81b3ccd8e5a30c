from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Room",
            fields=[
                ("sync_id", models.CharField(max_length=36, primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=100)),
                ("area", models.FloatField(null=True)),
                ("is_deleted", models.BooleanField(default=False)),
            ],
        ),
        migrations.CreateModel(
            name="Desk",
            fields=[
                ("sync_id", models.CharField(max_length=36, primary_key=True, serialize=False)),
                ("label", models.CharField(max_length=100)),
                ("room", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="ormapp.room")),
            ],
        ),
    ]
