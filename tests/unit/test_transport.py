"""FastTransport against small real servers on loopback, one behaviour each."""

import asyncio

import httpx
import pytest

from workbench.model.transport import FastTransport

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def serve(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/x"


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    return head, await reader.readexactly(length)


def request(url, body=b"{}", read=5.0):
    timeout = httpx.Timeout(read, connect=2.0)
    return httpx.Request("POST", url, content=body, headers={"Host": "x"}, extensions={"timeout": timeout.as_dict()})


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_requests_reuse_one_keep_alive_connection():
    connections = 0

    async def handler(reader, writer):
        nonlocal connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            writer.write(OK)

    async def main():
        server, url = await serve(handler)
        t = FastTransport()
        for _ in range(5):
            r = await t.handle_async_request(request(url, b'{"a": 1}'))
            await r.aread()
            assert r.status_code == 200 and r.json() == {}
        await t.aclose()
        server.close()

    run(main())
    assert connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_transparently():
    async def handler(reader, writer):
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
        writer.close()  # no keep-alive, without saying so

    async def main():
        server, url = await serve(handler)
        t = FastTransport()
        for _ in range(3):
            r = await t.handle_async_request(request(url))
            await asyncio.sleep(0.05)  # idle between requests: the server's close arrives meanwhile
            assert r.status_code == 200
        server.close()

    run(main())


def test_a_truncated_body_raises_a_protocol_error():
    async def handler(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial")
        await writer.drain()
        writer.close()

    async def main():
        server, url = await serve(handler)
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await FastTransport().handle_async_request(request(url))
        server.close()

    run(main())


def test_a_silent_server_raises_read_timeout():
    async def handler(reader, writer):
        await asyncio.sleep(10)  # a server that never answers (the behaviour under test)

    async def main():
        server, url = await serve(handler)
        with pytest.raises(httpx.ReadTimeout):
            await FastTransport().handle_async_request(request(url, read=0.2))
        server.close()

    run(main())


def test_a_closed_port_raises_connect_error():
    async def main():
        server, url = await serve(lambda r, w: None)
        server.close()
        await server.wait_closed()
        with pytest.raises(httpx.ConnectError):
            await FastTransport().handle_async_request(request(url))

    run(main())


def test_chunked_responses_are_reassembled():
    async def handler(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5\r\n\": 1}\r\n0\r\n\r\n")

    async def main():
        server, url = await serve(handler)
        r = await FastTransport().handle_async_request(request(url))
        await r.aread()
        assert r.json() == {"a": 1}
        server.close()

    run(main())


def test_the_request_is_sent_with_its_headers_and_body_intact():
    seen = {}

    async def handler(reader, writer):
        head, body = await read_request(reader)
        seen["head"], seen["body"] = head, body
        writer.write(OK)

    async def main():
        server, url = await serve(handler)
        req = httpx.Request("POST", url, content=b'{"x": 1}', headers={"Host": "h", "Authorization": "Bearer k"},
                            extensions={"timeout": httpx.Timeout(5.0).as_dict()})
        await FastTransport().handle_async_request(req)
        server.close()

    run(main())
    assert seen["head"].startswith(b"POST /v1/x HTTP/1.1\r\n")
    assert b"authorization: Bearer k" in seen["head"].lower().replace(b"bearer", b"Bearer")
    assert seen["body"] == b'{"x": 1}'
