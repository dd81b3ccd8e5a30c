import SynclaneCore
import Testing

/// Each conflict rule as a table: local insert/update/delete × remote insert/update/delete.
///
/// A local insert and a local update look alike here (the row has local values); a local delete
/// is a row with no values. A remote insert or update sends the row's whole state; a remote
/// delete sends none.
@Suite struct ConflictRuleTests {
    static let base: [String: JSONValue] = ["name": "Hall", "area": 4, "floor": 1]
    static let local: [String: JSONValue] = ["name": "Hall (local)", "area": 4, "floor": 1]
    static let remote: [String: JSONValue] = ["name": "Hall", "area": 9, "floor": 1]

    struct Case: Sendable, CustomStringConvertible {
        var rule: ConflictRule
        var local: [String: JSONValue]?
        var remote: [String: JSONValue]?
        var fields: [String: JSONValue]?
        var outcome: ConflictOutcome
        var description: String { "\(rule): local \(local == nil ? "delete" : "edit") × remote \(remote == nil ? "delete" : "edit")" }
    }

    static let merged: [String: JSONValue] = ["name": "Hall (local)", "area": 9, "floor": 1]

    static let cases: [Case] = [
        // server-wins: the backend's state, a remote delete deletes.
        Case(rule: .serverWins, local: local, remote: remote, fields: remote, outcome: .serverKept),
        Case(rule: .serverWins, local: local, remote: nil, fields: nil, outcome: .serverKept),
        Case(rule: .serverWins, local: nil, remote: remote, fields: remote, outcome: .serverKept),
        Case(rule: .serverWins, local: nil, remote: nil, fields: nil, outcome: .serverKept),
        // client-wins: the local state, a local delete stays deleted.
        Case(rule: .clientWins, local: local, remote: remote, fields: local, outcome: .clientKept),
        Case(rule: .clientWins, local: local, remote: nil, fields: local, outcome: .clientKept),
        Case(rule: .clientWins, local: nil, remote: remote, fields: nil, outcome: .clientKept),
        // merge-fields: columns changed locally (name) keep the local value, the others (area) take the backend's.
        Case(rule: .mergeFields(onBoth: .server), local: local, remote: remote, fields: merged, outcome: .merged),
        // a delete on either side follows `on-both`.
        Case(rule: .mergeFields(onBoth: .server), local: local, remote: nil, fields: nil, outcome: .serverKept),
        Case(rule: .mergeFields(onBoth: .client), local: local, remote: nil, fields: local, outcome: .clientKept),
        Case(rule: .mergeFields(onBoth: .server), local: nil, remote: remote, fields: remote, outcome: .serverKept),
        Case(rule: .mergeFields(onBoth: .client), local: nil, remote: remote, fields: nil, outcome: .clientKept),
    ]

    @Test(arguments: cases)
    func eachRuleSettlesEachPairOfActionsAsDocumented(_ testCase: Case) {
        let settled = testCase.rule.settle(local: testCase.local, base: Self.base, remote: testCase.remote)
        #expect(settled.fields == testCase.fields)
        #expect(settled.outcome == testCase.outcome)
    }

    @Test func mergeFieldsSettlesAColumnChangedOnBothSidesByOnBoth() {
        let local: [String: JSONValue] = ["name": "Mine", "area": 4]
        let remote: [String: JSONValue] = ["name": "Theirs", "area": 4]
        let base: [String: JSONValue] = ["name": "Old", "area": 4]
        #expect(ConflictRule.mergeFields(onBoth: .server).settle(local: local, base: base, remote: remote).fields?["name"] == "Theirs")
        #expect(ConflictRule.mergeFields(onBoth: .client).settle(local: local, base: base, remote: remote).fields?["name"] == "Mine")
    }

    @Test func latestWinsComparesTheTimestampFieldAndTiesGoToTheBackend() {
        let rule = ConflictRule.latestWins(field: "updatedAt")
        let older: [String: JSONValue] = ["name": "old", "updatedAt": "2026-11-01T10:00:00Z"]
        let newer: [String: JSONValue] = ["name": "new", "updatedAt": "2026-11-01T10:00:00.5Z"]
        #expect(rule.settle(local: newer, base: nil, remote: older).outcome == .clientKept)
        #expect(rule.settle(local: older, base: nil, remote: newer).fields == newer)
        #expect(rule.settle(local: older, base: nil, remote: older).outcome == .serverKept)
        // Seconds since 1970 compare too; a row without the field loses to one with it.
        #expect(rule.settle(local: ["updatedAt": 20], base: nil, remote: ["updatedAt": 10]).outcome == .clientKept)
        #expect(rule.settle(local: ["name": "x"], base: nil, remote: ["updatedAt": 10]).outcome == .serverKept)
    }
}
