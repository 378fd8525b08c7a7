"""Running the service: the listening socket that `serve --workers` shares between processes."""

import asyncio
import socket

from engram_index.server import tcp_listener


async def accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection that asyncio accepts on the listener, as uvicorn's workers serve it."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        value = await asyncio.wait_for(accepted, 5)
        writer.close()
        return value
    finally:
        server.close()


def test_connections_accepted_on_the_shared_listening_socket_have_nagle_off() -> None:
    # Without it, every keep-alive response waits for the client's delayed ACK (~40 ms on Linux).
    listener = tcp_listener("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(accepted_nodelay(listener)) != 0


def test_the_shared_listening_socket_is_inheritable_by_worker_processes() -> None:
    listener = tcp_listener("127.0.0.1", 0)
    try:
        assert listener.get_inheritable()
    finally:
        listener.close()
