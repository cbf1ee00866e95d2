"""The sandbox: a faithful local emulation of the Personal Finance Data API v1.

sb = Sandbox(SandboxConfig(seed=1))
sb.app      # the ASGI app (httpx.ASGITransport(app=sb.app) for in-process use)
sb.keys     # {"read_only", "read_write", "expired", "admin_token"}
Sandbox(config, dialect="keyed")  # another service's way of answering (`dialects.py`)
"""

from centsync.sandbox.app import SandboxApp
from centsync.sandbox.service import SandboxConfig, Service


class Sandbox:
    """One emulated service: its state and the ASGI app that serves it."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        service: Service | None = None,
        dialect: str = "contract",
    ) -> None:
        self.config = config or SandboxConfig()
        # a service given is one restored from its state file (`sandbox/state.py`)
        self.service = service or Service(self.config)
        # how /v1 answers the surfaces the API document leaves "not shown" (`dialects.py`)
        self.dialect = dialect
        self.app = SandboxApp(self.service, dialect)

    @property
    def keys(self) -> dict[str, str]:
        return {**self.service.key_values, "admin_token": self.service.admin_token}

    def state(self) -> dict[str, object]:
        """The exact server state (what `GET /_sandbox/state` returns)."""
        return self.service.dump()


__all__ = ["Sandbox", "SandboxConfig"]
