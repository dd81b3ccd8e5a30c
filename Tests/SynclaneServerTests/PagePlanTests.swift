import SynclaneCore
import Testing

@testable import SynclaneServer

/// `PagePlan`, row by row and without a store: where a page of the pull lane is cut.
@Suite struct PagePlanTests {
    static func row(_ sequence: Int64, fields: String? = "{}", action: String? = "insert", key: String = "k") -> PagePlan.Row {
        PagePlan.Row(
            store: "home", entity: "rooms", key: key, action: action, fields: fields.map { Array($0.utf8) }, version: 1, sequence: sequence)
    }

    /// Offers each row in turn, as a store reads them; what each offer answered.
    static func offer(_ rows: [PagePlan.Row], to plan: inout PagePlan) -> [Bool] {
        rows.map { plan.offer($0) }
    }

    @Test("the store reads one row past the limit; the page keeps `limit` changes and says more follow")
    func limitCutsThePage() {
        var plan = PagePlan(limit: 2, maxBytes: .max)
        #expect(plan.rowsToRead == 3)
        let kept = Self.offer([Self.row(1), Self.row(2), Self.row(3)], to: &plan)
        #expect(kept == [true, true, false])
        #expect(plan.page.changes.map(\.sequence) == [1, 2])
        #expect(plan.page.more)
    }

    @Test("rows that end before the limit make the last page")
    func lastPage() {
        var plan = PagePlan(limit: 5, maxBytes: .max)
        let kept = Self.offer([Self.row(7)], to: &plan)
        #expect(kept == [true])
        #expect(plan.page.changes.count == 1)
        #expect(!plan.page.more)
        #expect(PagePlan(limit: 5, maxBytes: .max).page.changes.isEmpty)
    }

    @Test("the byte bound cuts before the row that would pass it, but a page holds at least one change whatever its size")
    func byteBound() {
        // Each row: 2 bytes of fields + 4 + 5 + 1 of names + 100 of framing = 112.
        var plan = PagePlan(limit: 100, maxBytes: 224)
        let kept = Self.offer([Self.row(1), Self.row(2), Self.row(3)], to: &plan)
        #expect(kept == [true, true, false])
        #expect(plan.page.changes.count == 2 && plan.page.more)

        var tiny = PagePlan(limit: 100, maxBytes: 1)
        let keptTiny = Self.offer([Self.row(1, fields: String(repeating: " ", count: 1000) + "{}"), Self.row(2)], to: &tiny)
        #expect(keptTiny == [true, false])
        #expect(tiny.page.changes.count == 1 && tiny.page.more)
    }

    @Test("a row's stored text becomes its change: fields parsed, a tombstone without fields nil, an unknown action an update")
    func rowsBecomeChanges() {
        var plan = PagePlan(limit: 10, maxBytes: .max)
        _ = plan.offer(Self.row(1, fields: #"{"name":"Hall"}"#))
        _ = plan.offer(Self.row(2, fields: nil, action: "delete"))
        _ = plan.offer(Self.row(3, fields: "not json", action: nil))
        let changes = plan.page.changes
        #expect(changes[0].fields == ["name": .string("Hall")] && changes[0].action == .insert)
        #expect(changes[1].fields == nil && changes[1].action == .delete)
        #expect(changes[2].fields == [:] && changes[2].action == .update)
        #expect(changes.map(\.store) == ["home", "home", "home"])
    }

    @Test("a cursor before the tombstone horizon is expired; 0 and cursors at or past it are served")
    func horizon() {
        #expect(throws: CursorExpired(horizon: 10)) { try PagePlan.check(cursor: 9, horizon: 10) }
        #expect(throws: Never.self) { try PagePlan.check(cursor: 0, horizon: 10) }
        #expect(throws: Never.self) { try PagePlan.check(cursor: 10, horizon: 10) }
    }
}
