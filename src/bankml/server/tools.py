"""llama-server's built-in tools (tools/server/server-tools.cpp): `--tools a,b | all` enables them at GET /tools
(their definitions) and POST /tools (a call). Without --tools both answer 403 "this feature is disabled".
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ..errors import BankmlError
from .http import error_response, feature_disabled

#: build_tools()'s order
NAMES = ("read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file",
         "get_info")


class ToolsSetupError(BankmlError):
    """server_tools::setup refuses the --tools list (llama-server: "tools setup failed: ...", exit 1)."""


def check(enabled: list[str]) -> None:
    for name in enabled:
        if name != "all" and name not in NAMES:
            raise ToolsSetupError(f"tools setup failed: unknown tool \"{name}\". available tools: " + ", ".join(NAMES))


async def tools_route(request: Request):
    cfg = request.app.state.ctx.cfg
    if not cfg.server_tools:
        return feature_disabled()
    return error_response("the built-in tools (/tools) are not reproduced by bankml yet", 501)


routes = [Route("/tools", tools_route, methods=["GET", "POST"])]
