"""Who holds the other end of a loopback connection (runner/workspace/peer.py): the
forwarder serves only the git it started. The table parser against /proc/net/tcp's text,
then real connections held by a child of this test or by no one it asks about."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import pytest

from runner.workspace.peer import client_inode, served_by_tree

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"


def row(local: str, remote: str, inode: int) -> str:
    """One line as the kernel writes it: the inode is the tenth field."""
    return f"   0: {local} {remote} 01 00000000:00000000 00:00000000 00000000 1000 0 {inode} 1\n"


def test_the_client_end_is_found_by_both_ports_in_either_byte_order() -> None:
    table = (
        HEADER
        + row("0100007F:9C40", "0100007F:1F90", 111)  # 127.0.0.1:40000 -> :8080
        + row("7F000001:9C41", "7F000001:1F90", 222)  # the other byte order, :40001
        + row("0100007F:1F90", "0100007F:9C40", 333)  # the server's end of the first
    )
    assert client_inode(40000, 8080, table) == 111
    assert client_inode(40001, 8080, table) == 222
    assert client_inode(40000, 8081, table) is None


def test_another_address_a_header_line_or_inode_zero_is_no_socket() -> None:
    table = HEADER + row("0200007F:9C40", "0100007F:1F90", 111)  # from 127.0.0.2
    assert client_inode(40000, 8080, table) is None
    assert client_inode(40000, 8080, row("0100007F:9C40", "0100007F:1F90", 5)) is None
    timewait = HEADER + row("0100007F:9C40", "0100007F:1F90", 0)
    assert client_inode(40000, 8080, timewait) is None
    assert client_inode(40000, 8080, HEADER + "garbage\n") is None


@pytest.fixture
def server() -> Iterator[socket.socket]:
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(10)
    yield srv
    srv.close()


def test_a_connection_held_by_a_child_counts_for_its_tree_only(server: socket.socket) -> None:
    port = server.getsockname()[1]
    holder = subprocess.Popen(
        ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}; echo on; exec sleep 300"],
        stdout=subprocess.PIPE,
    )
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"on\n"
        conn, (_, client_port) = server.accept()
        with conn:
            assert served_by_tree(client_port, port, holder.pid)
            assert not served_by_tree(client_port, port, stranger.pid)
    finally:
        for proc in (holder, stranger):
            proc.kill()
            proc.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert not served_by_tree(client_port, port, holder.pid)  # gone with its holder


def test_a_root_with_descendants_and_an_end_of_the_servers_own(server: socket.socket) -> None:
    """git push starts git-remote-http, which connects: the root's descendants count. The
    server's own end is not a client end."""
    port = server.getsockname()[1]
    shell = subprocess.Popen(
        ["bash", "-c", f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; echo on; exec sleep 300'"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert shell.stdout is not None and shell.stdout.readline() == b"on\n"
        conn, (_, client_port) = server.accept()
        with conn:
            assert served_by_tree(client_port, port, shell.pid)
            assert not served_by_tree(port, client_port, shell.pid)
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
        if shell.stdout is not None:
            shell.stdout.close()
