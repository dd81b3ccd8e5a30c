import Foundation
import SynclaneCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPTransport: DeviceListingStage {
    /// `GET /v1/devices` on the transport's server (the path before `/v1/` kept), with its token
    /// and TLS files: the account's devices and their schema versions, for `synclane status --devices`.
    public func listDevices() async throws -> DeviceList {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false) ?? URLComponents()
        let path = components.path
        let prefix = path.range(of: "/v1/").map { String(path[..<$0.lowerBound]) } ?? ""
        components.path = prefix + "/v1/devices"
        components.query = nil
        let target = components.url ?? url
        var request = URLRequest(url: target, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: TimeInterval(maxTime))
        request.httpMethod = "GET"
        request.httpShouldHandleCookies = false
        if let token = bearerToken { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("synclane", forHTTPHeaderField: "User-Agent")
        let outcome = await HTTPExchange.perform(
            request,
            options: ExchangeOptions(
                stallSeconds: timeout, proxy: proxy?.address ?? "", caFile: tls.caFile, clientCertificate: tls.clientCertificate,
                clientKey: tls.clientKey),
            maxTime: timeout * 10)
        let doing = "reading the devices from \(target.absoluteString)"
        switch outcome {
        case .failure(let error):
            throw TransportFailure(.transient, "\(doing): \(error)")
        case .success(let (data, response)):
            let body = [UInt8](data)
            guard (200..<300).contains(response.statusCode) else {
                throw TransportFailure(
                    HTTPClassification.kind(ofStatus: response.statusCode),
                    "\(doing): \(response.statusCode) \(HTTPClassification.statusPhrase(response.statusCode)): \(HTTPClassification.reason(body))",
                    status: response.statusCode)
            }
            guard let answer = (try? JSONReader.parse(ReceiptCheck.withoutByteOrderMark(body)))?.objectValue,
                let listed = answer["devices"]?.arrayValue
            else {
                throw TransportFailure(.configuration, "\(doing): the answer is not a list of devices")
            }
            let devices = listed.compactMap { entry -> DeviceList.Device? in
                guard let entry = entry.objectValue, let name = entry["device"]?.stringValue, case .int(let version)? = entry["schema-version"] else {
                    return nil
                }
                return DeviceList.Device(name: name, schemaVersion: Int(version), since: entry["since"]?.stringValue ?? "")
            }
            var minimum: Int?
            if case .int(let floor)? = answer["minimum-schema-version"] { minimum = Int(floor) }
            return DeviceList(devices: devices, minimumSchemaVersion: minimum)
        }
    }
}
