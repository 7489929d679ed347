"""One window per user: a file opened from the file manager while NNEditor runs is handed to
the running window (a QLocalServer named per user), which opens it the usual way — asking
about unsaved changes first. ``NNEDITOR_SINGLE_INSTANCE=0`` turns it off; screenshots and
trace viewers (``--screenshot``, ``--open-trace``) always start their own window."""

from __future__ import annotations

import getpass
import os
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtNetwork import QLocalServer, QLocalSocket

ENV = "NNEDITOR_SINGLE_INSTANCE"
NAME_ENV = "NNEDITOR_INSTANCE_NAME"  # tests: a private server name


def server_name() -> str:
    return os.environ.get(NAME_ENV) or f"nneditor-{getpass.getuser()}"


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def forward(path: str, timeout_ms: int = 500) -> bool:
    """Hand ``path`` to a running window; False when none answers."""
    sock = QLocalSocket()
    sock.connectToServer(server_name())
    if not sock.waitForConnected(timeout_ms):
        return False
    sock.write(os.path.abspath(path).encode("utf-8") + b"\n")
    sock.flush()  # often writes everything at once, and then there is nothing to wait for
    ok = sock.bytesToWrite() == 0 or sock.waitForBytesWritten(timeout_ms)
    sock.disconnectFromServer()
    if sock.state() != QLocalSocket.LocalSocketState.UnconnectedState:
        sock.waitForDisconnected(timeout_ms)
    return bool(ok)


class InstanceServer(QObject):
    """Listens for paths from later launches and opens them in ``window``."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        name = server_name()
        if not self.server.listen(name):  # a crashed instance left its socket behind
            QLocalServer.removeServer(name)
            self.server.listen(name)
        self.server.newConnection.connect(self._accept)

    @property
    def listening(self) -> bool:
        return self.server.isListening()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            buf = bytearray()

            def read(sock: QLocalSocket = sock, buf: bytearray = buf) -> None:
                buf.extend(bytes(sock.readAll().data()))
                if b"\n" in buf:
                    path = buf.split(b"\n", 1)[0].decode("utf-8", "replace")
                    sock.disconnectFromServer()
                    self._open(path)

            sock.readyRead.connect(read)
            if sock.bytesAvailable():
                read()

    def _open(self, path: str) -> None:
        w = self.window
        w.showNormal()
        w.raise_()
        w.activateWindow()
        if path and os.path.exists(path):
            w.open_path(path)
