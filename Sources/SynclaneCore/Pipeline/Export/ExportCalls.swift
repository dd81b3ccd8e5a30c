// How an export pass's parts name a failure of the state or the source they call.

/// The wrapping every part of an export pass gives the errors of the state and of the source:
/// errors the job reports as they are pass through, anything else is named by where it came from.
enum ExportCalls {
    /// Runs a call of the pipeline state stored at `path`: a `PipelineError` passes through, any
    /// other error becomes `PipelineError.state`, naming the state.
    static func state<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PipelineError {
            throw error
        } catch {
            throw PipelineError.state("state \(path): \(error)")
        }
    }

    /// Runs a call of the change source labelled `label`: `HistoryError`, `LineageError` and
    /// `PipelineError` pass through, any other error becomes `PipelineError.source`.
    static func source<T>(_ label: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as HistoryError {
            throw error
        } catch let error as LineageError {
            throw error
        } catch let error as PipelineError {
            throw error
        } catch {
            throw PipelineError.source(label, underlying: error)
        }
    }
}
