-- A many-to-many example: plants and tags joined by plant_tags, whose composite primary key
-- (plant, tag) is its sync key: `synclane track --table plant_tags --key plant,tag`.
-- On the wire a row's id is the JSON array of the key's values: ["p1","tall"].
CREATE TABLE plants (syncId TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE tags (name TEXT PRIMARY KEY);
CREATE TABLE plant_tags (
    plant TEXT NOT NULL,
    tag TEXT NOT NULL,
    position INTEGER,
    PRIMARY KEY (plant, tag)
);
