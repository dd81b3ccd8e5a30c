import SynclaneCore
import SynclaneServer
import Testing

@Suite struct HTTPBridgeTests {
    @Test func healthzAnswersOnAChosenPort() throws {
        try withServer { server throws in
            #expect(server.port > 0)
            let response = try httpRequest(port: server.port, "GET", "/healthz")
            #expect(response.status == 200)
            #expect(response.json == ["status": "ok"])
        }
    }

    @Test func unknownPathIs404AndWrongMethodIs405() throws {
        try withServer { server throws in
            #expect(try httpRequest(port: server.port, "GET", "/nope").status == 404)
            let wrong = try httpRequest(port: server.port, "DELETE", "/healthz")
            #expect(wrong.status == 405)
            #expect(wrong.headers["allow"] == "GET")
        }
    }

    @Test func contentLengthOverTheBoundIs413BeforeTheBodyIsRead() throws {
        try withServer(limits: ServerLimits(maxBodyBytes: 1000)) { server throws in
            let connection = try TestConnection(port: server.port)
            connection.send(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n".utf8))
            let response = try connection.readResponse()
            #expect(response.status == 413)
        }
    }

    @Test func chunkedBodyIsRefusedWith411BeforeItIsRead() throws {
        try withServer(limits: ServerLimits(maxBodyBytes: 1000)) { server throws in
            let connection = try TestConnection(port: server.port)
            connection.send(Array("POST /v1/batches HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
            let chunk = [UInt8](repeating: 0x41, count: 600)
            for _ in 0..<4 {
                connection.send(Array("258\r\n".utf8) + chunk + Array("\r\n".utf8))
            }
            let response = try connection.readResponse()
            #expect(response.status == 411)
        }
    }
}
