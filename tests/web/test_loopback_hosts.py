"""``stalwart ui`` bound to a loopback address other than 127.0.0.1 answers
to that address, prints a URL it listens on, and still refuses a host name
that is not loopback (DNS rebinding)."""

from __future__ import annotations

import httpx

from .ui_server import serving_ui


def test_ui_on_another_loopback_address_serves_the_address_it_prints(seeded: str) -> None:
    with serving_ui(seeded, host="127.0.0.2") as ui:
        url = ui.banner.removeprefix("stalwart ui: open ")
        assert url == f"{ui.base}/"  # the address it listens on, not localhost
        assert httpx.get(f"{url}runs", timeout=10).status_code == 200
        assert httpx.get(f"{url}waiting", timeout=10).status_code == 200
        rebound = httpx.get(f"{url}runs", headers={"Host": "evil.example"}, timeout=10)
        assert rebound.status_code == 421


def test_ui_on_127_0_0_1_still_prints_localhost_and_answers_to_it(seeded: str) -> None:
    with serving_ui(seeded) as ui:
        port = ui.base.rsplit(":", 1)[1]
        assert ui.banner == f"stalwart ui: open http://localhost:{port}/"
        assert httpx.get(f"{ui.base}/runs", timeout=10).status_code == 200
        named = httpx.get(f"{ui.base}/runs", headers={"Host": f"localhost:{port}"}, timeout=10)
        assert named.status_code == 200
