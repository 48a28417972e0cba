"""A real SMTP server (aiosmtpd) on a free loopback port that keeps every message it receives."""

from __future__ import annotations

import email
import email.policy
from dataclasses import dataclass, field
from email.message import EmailMessage

from tests.harness.services import free_port


@dataclass
class ReceivedMessage:
    """One SMTP transaction: envelope plus the parsed message."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"] or "")


class _CollectingHandler:
    def __init__(self, messages: list[ReceivedMessage]) -> None:
        self.messages = messages

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        parsed = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        self.messages.append(ReceivedMessage(envelope.mail_from, list(envelope.rcpt_tos), parsed))
        return "250 Message accepted for delivery"


@dataclass
class SmtpServer:
    """A running aiosmtpd Controller; `messages` fills as mail arrives."""

    host: str
    port: int
    messages: list[ReceivedMessage] = field(default_factory=list)
    controller: object | None = None

    def start(self) -> SmtpServer:
        from aiosmtpd.controller import Controller

        self.controller = Controller(_CollectingHandler(self.messages), hostname=self.host, port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


def start_smtp_server(host: str = "127.0.0.1") -> SmtpServer:
    return SmtpServer(host=host, port=free_port(host)).start()
