"""Dependencies shared by the routers: the process's Sidecar, typed for injection."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from openclaw_lossless.sidecar import Sidecar


def get_sidecar(request: Request) -> Sidecar:
    sidecar: Sidecar = request.app.state.sidecar
    return sidecar


SidecarDep = Annotated[Sidecar, Depends(get_sidecar)]
