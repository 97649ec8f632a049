"""The errors of the chat step, shared by every module of bankml.chat.

Owns the exception types and what they carry: `message` (llama-server's error text) and `status` (its HTTP
status: 400 where the reference throws std::invalid_argument, 500 for any other exception, 501 where bankml does
not reproduce the reference).
Must not know: where they are raised or how the server writes them out (bankml.chat.request.error_body).
"""

from __future__ import annotations

from ..errors import BankmlError


class TemplateError(BankmlError):
    """Base of the template step's errors: `message` is llama-server's text, `status` its HTTP status."""

    status = 500

    def __init__(self, message: str, status: int | None = None):
        self.message = message
        if status is not None:
            self.status = status
        super().__init__(message)


class TemplateLoadError(TemplateError):
    """llama-server refuses to start with this template (it cannot be parsed, or the startup renders fail)."""


class TemplateApplyError(TemplateError):
    """Rendering a request failed the way llama-server fails it (400: invalid_argument, 500: any other error)."""


class TemplateNotReproduced(TemplateError):
    """bankml cannot tell what llama-server would answer here; `reason` says what is missing."""

    status = 501

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__("not reproduced by bankml: " + reason, 501)


class ChatRequestError(BankmlError):
    """A request llama-server refuses: `status` (400 or 500) and `message`, its error text."""

    def __init__(self, message: str, status: int = 400):
        self.message = message
        self.status = status
        super().__init__(message)

    @property
    def error_type(self) -> str:
        return {400: "invalid_request_error", 500: "server_error", 501: "not_supported_error"}.get(
            self.status, "server_error")



def invalid_argument(msg: str) -> ChatRequestError:
    """A request refused where the reference throws std::invalid_argument (HTTP 400)."""
    return ChatRequestError(msg, 400)


def runtime_error(msg: str) -> ChatRequestError:
    """A request refused where the reference throws any other std::exception (HTTP 500)."""
    return ChatRequestError(msg, 500)
