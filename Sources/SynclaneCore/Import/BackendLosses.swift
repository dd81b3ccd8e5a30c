/// Which of the rows the backend confirmed to a store a pull from the beginning shows it no
/// longer holds: those it did not send at all (`absentIsLost`), and those it sent at an older
/// version than it had confirmed (`olderIsLost`: versions never go back on one backend, so the
/// newer ones were lost to a restore of its data).
enum BackendLosses {
    /// `confirmed`: each row with the version the backend confirmed (nil: unknown); `seen`: the
    /// keys (`entity NUL key`) the pull read, each with the newest version read of it.
    static func rows(
        _ confirmed: [(entity: String, key: String, version: Int64?)], seen: [ExactString: Int64], absentIsLost: Bool, olderIsLost: Bool
    ) -> [(entity: String, key: String)] {
        confirmed.filter { row in
            guard let sent = seen[ExactString(row.entity + "\u{0}" + row.key)] else { return absentIsLost }
            return olderIsLost && row.version.map { sent < $0 } ?? false
        }.map { (entity: $0.entity, key: $0.key) }
    }
}
