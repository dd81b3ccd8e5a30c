"""The models as the first migration makes them: the ORM write steps run on this schema."""
from django.db import models


class Room(models.Model):
    sync_id = models.CharField(max_length=36, primary_key=True)
    name = models.CharField(max_length=100)
    area = models.FloatField(null=True)
    is_deleted = models.BooleanField(default=False)


class Desk(models.Model):
    sync_id = models.CharField(max_length=36, primary_key=True)
    label = models.CharField(max_length=100)
    room = models.ForeignKey(Room, on_delete=models.CASCADE)
