"""A real OpenID Connect provider on loopback for the company sign-in tests: panva's `oidc-provider` (npm,
installed into tests/harness/oidc/ by `npm ci`) run by node in a second process. Skips (fails in CI) without
node or the package."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.harness.services import free_port, require_binary, require_service

HERE = Path(__file__).parent / "oidc"
CLIENT_ID = "gpufinops-test"
CLIENT_SECRET = "test-client-secret-not-a-real-one"


@dataclass
class OidcProvider:
    issuer: str
    accounts_file: Path
    process: subprocess.Popen

    def set_accounts(self, accounts: dict[str, dict]) -> None:
        """Accounts by login: {"alice": {"email": ..., "groups": [...]}}; read at every sign-in."""
        self.accounts_file.write_text(json.dumps(accounts))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_oidc_provider(tmp: Path, rp_base: str, *, id_token_ttl: int = 3600) -> OidcProvider:
    require_binary("node")
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        npm = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True,
                             timeout=600)
        if npm.returncode != 0:
            require_service("oidc-provider", f"npm ci failed: {npm.stderr[-500:]}")
    port = free_port()
    accounts = tmp / "accounts.json"
    accounts.write_text("{}")
    env = {**os.environ, "PORT": str(port), "CLIENT_ID": CLIENT_ID, "CLIENT_SECRET": CLIENT_SECRET,
           "REDIRECT_URIS": f"{rp_base}/oidc/callback/", "POST_LOGOUT_REDIRECT_URIS": f"{rp_base}/",
           "ACCOUNTS_FILE": str(accounts), "ID_TOKEN_TTL": str(id_token_ttl)}
    log = tmp / "oidc-provider.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["node", str(HERE / "provider.mjs")], cwd=HERE, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    issuer = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if requests.get(f"{issuer}/.well-known/openid-configuration", timeout=1).ok:
                return OidcProvider(issuer, accounts, process)
        except requests.RequestException:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    output = log.read_text(errors="replace")
    require_service("oidc-provider", f"did not start: {output[-1000:]}")
    raise AssertionError("unreachable")
