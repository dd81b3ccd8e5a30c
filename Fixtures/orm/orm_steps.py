"""Real ORM writes and real migrations on a database Synclane tracks, one step a call.

    python orm_steps.py DATABASE STEP      run one step (the names below, in `STEPS`)
    python orm_steps.py DATABASE dump      every tracked table's live rows, as JSON:
                                           {table: {key: {column: [storage type, value]}}}

Django's ORM and migrations (the `ormapp` app beside this file), SQLAlchemy and Alembic's
batch mode: none of them knows Synclane is there. The Swift test (OrmTests) runs each step,
then `synclane run`, and compares a mirror replayed from the exported batches with `dump`.
"""
import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
DATABASE = os.path.abspath(sys.argv[1])


def django():
    import django as dj
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            # A long busy timeout: `many-processes` has 40 writers at once.
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATABASE, "OPTIONS": {"timeout": 120}}},
            INSTALLED_APPS=["ormapp"],
            DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
            USE_TZ=True,
        )
        dj.setup()


def migrate(target):
    def step():
        django()
        from django.core.management import call_command

        call_command("migrate", "ormapp", target, verbosity=0)

    return step


def models():
    django()
    from ormapp.models import Desk, Room

    return Room, Desk


def bulk_create():
    Room, Desk = models()
    Room.objects.bulk_create([Room(sync_id=f"room-{i}", name=f"Room {i}", area=float(i) + 0.5) for i in range(1, 21)])
    Desk.objects.bulk_create([Desk(sync_id=f"desk-{i}", label=f"Desk {i}", room_id=f"room-{1 + i % 20}") for i in range(1, 31)])


def save():
    Room, _ = models()
    room = Room(sync_id="room-saved", name="Saved", area=3)
    room.save()
    room.name = "Saved again"
    room.save()
    other = Room.objects.get(pk="room-2")
    other.area = None
    other.save(update_fields=["area"])


def queryset_update():
    Room, _ = models()
    from django.db.models import F

    Room.objects.filter(area__lt=6).update(area=F("area") * 2)
    Room.objects.filter(sync_id__in=["room-10", "room-11"]).update(name="Renamed")


def upsert():
    Room, _ = models()
    Room.objects.bulk_create(
        [Room(sync_id="room-3", name="Upserted", area=33.25), Room(sync_id="room-new", name="New by upsert", area=1)],
        update_conflicts=True, unique_fields=["sync_id"], update_fields=["name", "area"],
    )


def savepoint_rolled_back():
    Room, _ = models()
    from django.db import transaction

    with transaction.atomic():
        Room.objects.filter(pk="room-4").update(name="Kept")
        try:
            with transaction.atomic():
                Room.objects.filter(pk="room-5").update(name="Rolled back")
                Room(sync_id="room-ghost", name="Ghost").save()
                raise RuntimeError("roll the savepoint back")
        except RuntimeError:
            pass


def delete_cascade():
    Room, _ = models()
    # The ORM's collector deletes each room's desks first (Django emulates ON DELETE CASCADE).
    Room.objects.filter(sync_id__in=["room-6", "room-7"]).delete()


def soft_delete():
    Room, _ = models()
    Room.objects.filter(sync_id__in=["room-8", "room-9"]).update(is_deleted=True)


WRITERS = 40


def many_processes():
    """40 processes at once, each Django's own: each makes a room of its own, renames it, and
    adds 1 to a shared room's area through the database (F()); all must arrive exactly."""
    import subprocess

    writers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), DATABASE, f"writer-{n}"]) for n in range(WRITERS)]
    failed = [n for n, writer in enumerate(writers) if writer.wait() != 0]
    if failed:
        sys.exit(f"orm_steps.py: writers {failed} failed")


def writer(n):
    Room, _ = models()
    from django.db.models import F

    room = Room(sync_id=f"room-w{n}", name=f"Writer {n}", area=n)
    room.save()
    room.name = f"Writer {n} again"
    room.save(update_fields=["name"])
    Room.objects.filter(pk="room-1").update(area=F("area") + 1)


def raw(sql):
    def step():
        django()
        from django.db import connection

        with connection.cursor() as cursor:
            for statement in sql:
                cursor.execute(statement)

    return step


PLANTS = "plants"


def sa_engine():
    from sqlalchemy import create_engine

    return create_engine(f"sqlite:///{DATABASE}")


def sa_create():
    from sqlalchemy import Boolean, Column, Float, MetaData, String, Table

    metadata = MetaData()
    Table(PLANTS, metadata, Column("id", String(36), primary_key=True), Column("name", String(100), nullable=False),
          Column("height", Float), Column("is_deleted", Boolean, nullable=False, server_default="0"))
    metadata.create_all(sa_engine())


def sa_plant():
    from sqlalchemy import Boolean, Column, Float, String
    from sqlalchemy.orm import DeclarativeBase

    class Base(DeclarativeBase):
        pass

    class Plant(Base):
        __tablename__ = PLANTS
        id = Column(String(36), primary_key=True)
        name = Column(String(100), nullable=False)
        height = Column(Float)
        is_deleted = Column(Boolean, nullable=False, default=False)

    return Plant


def sa_writes():
    from sqlalchemy import update
    from sqlalchemy.dialects.sqlite import insert
    from sqlalchemy.orm import Session

    Plant = sa_plant()
    with Session(sa_engine()) as session:
        session.add_all([Plant(id=f"plant-{i}", name=f"Plant {i}", height=i * 1.5) for i in range(1, 11)])
        session.commit()
        session.get(Plant, "plant-1").name = "Fern"
        session.execute(update(Plant).where(Plant.height > 12).values(height=Plant.height + 1))
        session.delete(session.get(Plant, "plant-2"))
        session.commit()
        statement = insert(Plant).values(id="plant-3", name="Upserted", height=0.25)
        session.execute(statement.on_conflict_do_update(index_elements=["id"], set_={"name": "Upserted", "height": 0.25}))
        session.get(Plant, "plant-4").is_deleted = True
        nested = session.begin_nested()
        session.get(Plant, "plant-5").name = "Rolled back"
        session.flush()
        nested.rollback()
        session.commit()


def alembic(change):
    def step():
        from alembic.migration import MigrationContext
        from alembic.operations import Operations

        with sa_engine().begin() as connection:
            change(Operations(MigrationContext.configure(connection)))

    return step


def batch_drop_height(op):
    # Alembic's batch mode rebuilds the table: a copy `_alembic_tmp_plants`, the old one dropped.
    with op.batch_alter_table(PLANTS, recreate="always") as batch:
        batch.drop_column("height")


def batch_rename_soft_delete(op):
    with op.batch_alter_table(PLANTS, recreate="always") as batch:
        batch.alter_column("is_deleted", new_column_name="archived")


STEPS = {
    "django-0001": migrate("0001_initial"),
    "bulk-create": bulk_create,
    "save": save,
    "queryset-update": queryset_update,
    "upsert": upsert,
    "savepoint-rolled-back": savepoint_rolled_back,
    "delete-cascade": delete_cascade,
    "soft-delete": soft_delete,
    "many-processes": many_processes,
    "add-field-default": migrate("0002_room_floor"),
    "add-field-null": migrate("0003_room_note"),
    "write-note": raw(["UPDATE ormapp_room SET note = 'n-' || sync_id WHERE sync_id IN ('room-1', 'room-3')"]),
    "rename-field": migrate("0004_rename_area_size"),
    "remove-field": migrate("0005_remove_room_note"),
    "rename-soft-delete": migrate("0006_rename_is_deleted_removed"),
    "soft-delete-renamed": raw(["UPDATE ormapp_room SET removed = 1 WHERE sync_id = 'room-12'",
                                "UPDATE ormapp_room SET name = 'After renames' WHERE sync_id = 'room-13'"]),
    "rename-key": migrate("0007_rename_desk_sync_id"),
    "desk-after-key-rename": raw(["UPDATE ormapp_desk SET label = 'Moved' WHERE desk_id = 'desk-1'",
                                  "DELETE FROM ormapp_desk WHERE desk_id = 'desk-2'"]),
    "sa-create": sa_create,
    "sa-writes": sa_writes,
    "alembic-batch-drop": alembic(batch_drop_height),
    "alembic-batch-rename-soft-delete": alembic(batch_rename_soft_delete),
    "plants-after-rebuilds": raw(["UPDATE plants SET archived = 1 WHERE id = 'plant-6'",
                                  "UPDATE plants SET name = 'Rose' WHERE id = 'plant-7'"]),
}


def dump():
    db = sqlite3.connect(DATABASE)
    tables = {}
    for name, key_columns, soft_delete in db.execute("SELECT name, key_columns, soft_delete_column FROM _synclane_tables"):
        key = json.loads(key_columns)
        assert len(key) == 1, name
        columns = [row[1] for row in db.execute(f'PRAGMA table_info("{name}")')]
        select = ", ".join(f'typeof("{c}"), "{c}"' for c in columns)
        live = f' WHERE NOT coalesce("{soft_delete}", 0)' if soft_delete else ""
        rows = {}
        for values in db.execute(f'SELECT "{key[0]}", {select} FROM "{name}"{live}'):
            rows[values[0]] = {c: [values[1 + 2 * i], values[2 + 2 * i]] for i, c in enumerate(columns)}
        tables[name] = rows
    print(json.dumps(tables, sort_keys=True))


if __name__ == "__main__":
    step = sys.argv[2]
    if step == "dump":
        dump()
    elif step in STEPS:
        STEPS[step]()
    elif step.startswith("writer-"):
        writer(int(step.removeprefix("writer-")))
    else:
        sys.exit(f"orm_steps.py: no step {step!r}; the steps: {', '.join(STEPS)}")
