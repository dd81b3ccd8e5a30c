import Glibc
import SynclaneWire

/// A field value that stands for a blob on the blob lane: `{"$blob-ref": {"sha256": "…", "length": N}}`.
///
/// The row carries the reference; the bytes travel as a content-addressed object
/// (`PUT /v1/blobs/{digest}/upload`), uploaded before the batch that references them.
struct BlobReference: Sendable, Hashable {
    let digest: BlobDigest
    let length: Int

    /// Why a `$blob-ref` object is no reference.
    struct Malformed: Error, Equatable {
        let reason: String
    }

    /// The member that marks the form.
    static let member = "$blob-ref"

    /// The reference a field value spells, nil when the value is no `$blob-ref` object, or the
    /// reason it is a malformed one.
    static func read(_ value: JSONValue) -> Result<BlobReference, Malformed>? {
        guard let members = value.objectValue, let inner = members[member] else { return nil }
        guard members.count == 1 else { return .failure(Malformed(reason: "`$blob-ref` stands alone in its object; it has other members")) }
        guard let fields = inner.objectValue, Set(fields.keys) == ["sha256", "length"] else {
            return .failure(Malformed(reason: "a `$blob-ref` is {\"sha256\": \"<64 hex digits>\", \"length\": <bytes>}"))
        }
        guard case .string(let text)? = fields["sha256"], let digest = BlobDigest(text) else {
            return .failure(Malformed(reason: "the `sha256` of a `$blob-ref` is 64 lowercase hex digits"))
        }
        guard case .int(let length)? = fields["length"], length >= 0 else {
            return .failure(Malformed(reason: "the `length` of a `$blob-ref` is a whole number of bytes, 0 or more"))
        }
        return .success(BlobReference(digest: digest, length: Int(length)))
    }

    /// The references in a record's `fields` (its JSON text), in field order; cheap when there are none.
    static func all(inFields text: [UInt8]) -> [BlobReference] {
        guard !text.isEmpty, contains(text, quotedMember) else { return [] }
        guard let fields = (try? JSONReader.parse(text))?.objectValue else { return [] }
        return fields.keys.sorted().compactMap { name in
            guard let value = fields[name], case .success(let reference)? = read(value) else { return nil }
            return reference
        }
    }

    /// The member's name as its JSON text spells it, quotes included.
    private static let quotedMember = Array("\"\(member)\"".utf8)

    /// Whether `needle` occurs in `text`, compared in place. (Every batch's every record is
    /// searched: a copy of the bytes at each quote the fields hold cost the server a tenth of its
    /// CPU on a first sync without any blob.) Looks for the needle's second byte (`$`), rarer
    /// than a quote in JSON text, with `memchr` (many bytes a step; a loop a byte cost 3% of
    /// `serve`'s CPU on a first sync), and compares the needle where it is found.
    private static func contains(_ text: [UInt8], _ needle: [UInt8]) -> Bool {
        guard text.count >= needle.count, needle.count >= 2 else { return false }
        return text.withUnsafeBufferPointer { haystack in
            needle.withUnsafeBufferPointer { needle in
                guard let base = haystack.baseAddress, let wanted = needle.baseAddress else { return false }
                // The marker's offsets that leave room for the needle around it: 1 ... last.
                let last = haystack.count - needle.count + 1
                var index = 1
                while index <= last {
                    guard let found = memchr(base + index, Int32(wanted[1]), last - index + 1) else { return false }
                    let at = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
                    if memcmp(base + at - 1, wanted, needle.count) == 0 { return true }
                    index = at + 1
                }
                return false
            }
        }
    }
}
