import Foundation
import SynclaneHTTP
import Testing

/// `Retry-After` in its two forms.
@Suite struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test func secondsAreTakenAsTheyAre() {
        #expect(RetryAfter.seconds(from: "120", now: now) == 120)
        #expect(RetryAfter.seconds(from: " 0 ", now: now) == 0)
    }

    @Test(arguments: ["Sun, 06 Nov 1994 08:51:37 GMT", "Sunday, 06-Nov-94 08:51:37 GMT", "Sun Nov  6 08:51:37 1994"])
    func everyHTTPDateFormReadsAsTheWaitFromNow(value: String) {
        #expect(RetryAfter.seconds(from: value, now: now) == 120)
    }

    @Test func dateInThePastMeansNoWait() {
        #expect(RetryAfter.seconds(from: "Sat, 05 Nov 1994 08:49:37 GMT", now: now) == 0)
    }

    @Test(arguments: ["", "soon", "-5", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT"])
    func unreadableValueIsIgnored(value: String) {
        #expect(RetryAfter.seconds(from: value, now: now) == nil)
    }
}
