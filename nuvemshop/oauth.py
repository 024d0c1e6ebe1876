"""The OAuth authorization-code install (the only grant Nuvemshop supports).

The admin sends the merchant to `AUTHORIZE_URL?state=...`; the merchant accepts; Nuvemshop
redirects to the app's redirection URL with `code` (valid 30 seconds) and `state`; the code is
exchanged at `TOKEN_URL` for `{access_token, token_type, scope, user_id}` (`user_id` is the store
id). Tokens do not expire: they stop working when the app is reinstalled or uninstalled.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from nuvemshop.client import NuvemshopError, http_client
from nuvemshop.conf import nuvemshop_settings

if TYPE_CHECKING:
    import httpx  # imported by code_exchange: the services import this module everywhere

SESSION_STATE_KEY = "nuvemshop_oauth_state"
SESSION_ORG_KEY = "nuvemshop_oauth_organization"


class OAuthError(Exception):
    """The code exchange failed (bad or expired code, wrong credentials, unexpected answer)."""


@dataclass(frozen=True)
class TokenGrant:
    access_token: str
    token_type: str
    scope: str
    ns_store_id: int


def new_state() -> str:
    return secrets.token_urlsafe(32)


def authorize_url(state: str) -> str:
    base = nuvemshop_settings.AUTHORIZE_URL.format(app_id=nuvemshop_settings.APP_ID)
    return f"{base}?{urlencode({'state': state})}"


def state_matches(expected: str | None, given: str | None) -> bool:
    return bool(expected) and bool(given) and secrets.compare_digest(str(expected), str(given))


def code_exchange(code: str, client: httpx.Client | None = None) -> TokenGrant:
    """POST the code with the app's credentials; the grant, or OAuthError."""
    import httpx

    body = {
        "client_id": nuvemshop_settings.APP_ID,
        "client_secret": nuvemshop_settings.CLIENT_SECRET,
        "grant_type": "authorization_code",
        "code": code,
    }
    own = client is None
    http = client or http_client()
    try:
        response = http.post(
            nuvemshop_settings.TOKEN_URL,
            json=body,
            headers={"User-Agent": nuvemshop_settings.USER_AGENT},
        )
    except httpx.HTTPError as error:
        raise OAuthError(f"token endpoint unreachable: {error}") from error
    finally:
        if own:
            http.close()
    return _grant(response)


def _grant(response: httpx.Response) -> TokenGrant:
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.status_code != 200 or "access_token" not in data:
        error = data.get("error_description") or data.get("error") or response.status_code
        raise OAuthError(f"code exchange refused: {error}")
    store_id = data.get("user_id") or data.get("store_id")
    try:
        return TokenGrant(
            access_token=str(data["access_token"]),
            token_type=str(data.get("token_type", "bearer")),
            scope=str(data.get("scope", "")),
            ns_store_id=int(store_id),
        )
    except (TypeError, ValueError) as error:
        raise OAuthError("the token answer has no store id") from error


__all__ = ["NuvemshopError", "OAuthError", "TokenGrant"]
