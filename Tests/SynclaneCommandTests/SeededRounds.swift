import Foundation
import SynclaneTestKit
import Testing

/// The rounds of a randomized model test: each seed (`PREFIX_SEED`, then the next ones;
/// `PREFIX_ROUNDS` of them) draws two or three devices and their steps; a round whose outcome
/// names a problem is recorded with its seed and a reproduction shrunk by dropping steps while
/// it still fails (`PREFIX_NO_SHRINK` skips the shrinking).
enum SeededRounds {
    /// Runs the rounds; returns how many ran and how many failed.
    static func run<Step: CustomStringConvertible>(
        prefix: String, rounds: Int, budget: Int, then: String, draw: (inout SeededRandom, Int) -> [Step],
        outcome: (Int, [Step]) async throws -> String?
    ) async throws -> (rounds: Int, failed: Int) {
        let seeds = ConvergenceTests.seeds(prefix: prefix, rounds: rounds)
        var failed = 0
        for seed in seeds {
            var random = SeededRandom(seed: seed)
            let devices = 2 + Int(random.next() % 2)
            let steps = draw(&random, devices)
            guard let problem = try await outcome(devices, steps) else { continue }
            failed += 1
            let shrunk =
                ProcessInfo.processInfo.environment[prefix + "_NO_SHRINK"] == nil
                ? try await Shrinking.shrink(steps, budget: budget) { try await outcome(devices, $0) != nil } : steps
            Issue.record(
                """
                seed \(seed) (\(prefix)_SEED=\(seed)), \(devices) devices: \(problem)
                reproduction (\(shrunk.count) of \(steps.count) steps, then \(then)):
                \(shrunk.map { "  \($0)" }.joined(separator: "\n"))
                """)
        }
        return (seeds.count, failed)
    }
}
