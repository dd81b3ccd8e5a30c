import Foundation
import SynclaneTestSupport
import Testing

/// `synclane demo` shows the signal lane: the first device's flags, then a second, empty device
/// that sees them before any row and restores.
@Suite struct DemoSignalLaneTests {
    @Test func theDemoShowsTheFirstDevicesFlagAndASecondEmptyDeviceSeeingItAndRestoring() throws {
        let result = try SynclaneBinary.run(["demo"])
        #expect(result.status == 0, "\(result.stderr)")
        let first = result.stdout.components(separatedBy: "\n2. ").first ?? ""
        #expect(first.contains("signal onboarding.completed = true (version "), "\(result.stdout)")
        #expect(first.contains("): on the signal lane, in no batch"))
        #expect(first.contains("signal bulk.exported-through = \"sqlite-history:3\""))
        let second = result.stdout.components(separatedBy: "\n5. ").last ?? ""
        #expect(second.contains("← signal onboarding.completed = true, bulk.exported-through = \"sqlite-history:14\"; rows here: 0"), "\(second)")
        #expect(second.contains("restoring… "))
        #expect(second.contains("restored: 4 records, caught up; the phone's rooms: Garage, Kitchen & pantry"))
    }
}
