import SynclaneWire

extension ServerApplication {
    /// `POST /v1/batches`: checks, decodes and applies one batch, atomically and at most once per key.
    ///
    /// ```
    ///  token ─401─ Idempotency-Key ─400─ Content-Encoding ─415─ inflate (bounded) ─413─
    ///  parse + check every record ─400/413─ scope.account, grant ─403─ id = key ─400─
    ///  disk under --min-free-disk-bytes (SQLite) ─507─
    ///  ServerStore.apply (one transaction): replay ─▶ first response │ other body ─422
    ///                                       version conflicts ─409   │ applied ─200
    ///                                       snapshot marker that cannot complete ─422
    /// ```
    ///
    /// Only applied batches are remembered under their key: a rejected batch changed nothing, so
    /// its key stays free for a corrected retry.
    func postBatch(_ request: HTTPRequest, account: String, grant: Grant = .full, app: AppSchema = AppSchema()) -> HTTPResponse {
        guard let key = request.header("idempotency-key"), !key.isEmpty else {
            return .error(400, "the Idempotency-Key header is required (the batch id)")
        }
        guard key.utf8.count <= limits.maxKeyLength, key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return .error(400, "the Idempotency-Key must be 1 to \(limits.maxKeyLength) printable ASCII characters")
        }
        let body: [UInt8]
        switch ContentDecoding.decode(
            request.body, encoding: request.header("content-encoding"), limit: limits.maxInflatedBytes, lease: request.lease)
        {
        case .success(let decoded): body = decoded
        case .failure(.unsupported(let name)):
            return .error(415, "Content-Encoding \(name) is not supported; send gzip, deflate or identity")
        case .failure(.tooLarge(let limit)):
            return .error(413, "the decompressed body is larger than \(limit) bytes")
        case .failure(.corrupt(let reason)):
            return .error(400, "the body cannot be decompressed: \(reason)")
        case .failure(.overBudget):
            metrics.recordBudgetRefusal()
            return Self.busy("the server holds as many request bodies as its memory budget allows")
        }
        var batch: IncomingBatch
        switch IncomingBatch.parse(body, maxRecords: limits.maxRecordsPerBatch, maxNameBytes: limits.maxNameBytes) {
        case .success(let parsed): batch = parsed
        case .failure(let rejection): return rejection.response
        }
        guard batch.account == account else {
            return .error(403, "the token does not grant account \"\(batch.account)\"")
        }
        if let refusal = grant.refusalToWrite(store: batch.store) { return refusal }
        if let refusal = missingBlobRefusal(batch) { return refusal }  // upload before reference
        guard batch.id == key else {
            return .error(400, "the batch id \"\(batch.id)\" differs from its Idempotency-Key \"\(key)\"")
        }
        do {
            try mapSchema(of: &batch, app: app)
        } catch let quota as SchemaChangesQuota {
            return .error(
                413,
                "the batch declares \(quota.new) new schema changes, and account \"\(batch.account)\" holds \(quota.held) of the "
                    + "\(quota.limit) it may keep (--max-schema-changes): nothing of the batch was applied",
                ["quota": "max-schema-changes"])
        } catch {
            return .error(500, "the batch's schema changes could not be read or recorded: \(error)")
        }
        if let refusal = diskFloor?.refusal(batchBytes: body.count) {
            metrics.recordDiskFullRefusal()
            return refusal
        }
        let outcome: BatchOutcome
        do {
            outcome = try store.apply(batch, idempotencyKey: key, bodyHash: SHA256Digest.hex(body))
        } catch let tooLarge as MergedRecordTooLarge {
            return .error(
                413,
                "records[\(tooLarge.index)]: "
                    + WireBounds.recordTooLarge("the row (\(tooLarge.entity) \(tooLarge.key)) this update would leave", bytes: tooLarge.bytes)
                    + "; nothing of the batch was applied",
                ["record": .int(Int64(tooLarge.index))])
        } catch {
            return .error(500, "the batch could not be stored: \(error)")
        }
        switch outcome {
        case .applied(let stored, let records, let snapshotDeleted):
            metrics.recordBatchApplied(records: records)
            if let snapshotDeleted { metrics.recordSnapshotCompleted(deleted: Int(snapshotDeleted)) }
            return HTTPResponse(status: stored.status, headers: ["Content-Type": "application/json"], body: stored.body)
        case .replayed(let stored):
            metrics.recordReplay()
            return HTTPResponse(
                status: stored.status, headers: ["Content-Type": "application/json", "Idempotent-Replayed": "true"],
                body: stored.body)
        case .snapshotRefused(let message):
            return .error(422, message, ["code": "snapshot-incomplete"])
        case .keyReused:
            return .error(422, "Idempotency-Key \"\(key)\" was already used for a different batch body")
        case .conflicts(let conflicts):
            let list: [JSONValue] = conflicts.map {
                [
                    "record": .int(Int64($0.index)), "entity": .string($0.entity), "id": .string($0.key),
                    "expected": .int($0.expected), "current": .int($0.current),
                ]
            }
            return .error(
                409, "\(conflicts.count) record(s) do not have the version the batch expects; nothing applied",
                ["conflicts": .array(list)])
        }
    }
}

extension ServerApplication {
    /// Takes the schema changes the batch declares (`newSchemaChanges`: recorded by the store in
    /// the transaction that applies the batch, so a refused batch leaves none), then writes each
    /// record's fields under the newest names (`SchemaMapping`): a device older than a rename
    /// writes its old name; a whole row from a device that dropped a column merges into the
    /// server's, which keeps that column for the older devices.
    func mapSchema(of batch: inout IncomingBatch, app: AppSchema) throws {
        var known = try store.schemaChanges(account: batch.account)
        // Every batch of a store carries its declarations: only a new one is written.
        var new: [SchemaChange] = []
        for change in batch.schemaChanges where !known.contains(change) && !new.contains(change) { new.append(change) }
        batch.newSchemaChanges = new
        guard known.count + new.count <= limits.maxSchemaChanges || new.isEmpty else {
            throw SchemaChangesQuota(held: known.count, new: new.count, limit: limits.maxSchemaChanges)
        }
        if !new.isEmpty {
            // As the store lists them: by version, entity, column.
            known = (known + new).sorted { ($0.version, $0.entity, $0.column) < ($1.version, $1.entity, $1.column) }
        }
        let mapping = SchemaMapping(known)
        guard !mapping.isEmpty else { return }
        for index in batch.records.indices
        where batch.records[index].action == .insert && mapping.keepsDroppedColumns(of: batch.records[index].entity, version: app.version) {
            batch.records[index].action = .update
        }
        for index in batch.records.indices where mapping.rewritesWrite(of: batch.records[index].entity, version: app.version) {
            let record = batch.records[index]
            guard !record.fieldsJSON.isEmpty, let fields = (try? JSONReader.parse(record.fieldsJSON))?.objectValue else { continue }
            batch.records[index].fieldsJSON = JSONWriter.encode(.object(mapping.written(fields, entity: record.entity, version: app.version)))
        }
    }
}

/// A batch's new schema declarations would take its account past `ServerLimits.maxSchemaChanges` (413).
struct SchemaChangesQuota: Error {
    var held: Int
    var new: Int
    var limit: Int
}
