"""The API's documentation pages (Swagger UI at /docs, ReDoc at /redoc) with their scripts and
styles served by the app itself, so that they work without internet access (FastAPI's own
pages load them from a CDN).

The assets come from the `fastapi-offline` package: Swagger UI 5 (the first to read OpenAPI
3.1, which FastAPI writes) and ReDoc. ReDoc's bundle fetches one image from its CDN (the
"API docs by Redocly" logo); the copy served here shows a blank one in its place.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from service.api.errors import NotFound

router = APIRouter(include_in_schema=False)

ASSETS_DIR = Path(str(resources.files("fastapi_offline") / "static"))
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}
ASSETS_URL = "/static/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
CACHE = {"Cache-Control": "public, max-age=86400"}
REDOC_LOGO = b'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'
BLANK_IMAGE = b'src:"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"'


@functools.cache
def offline_redoc() -> bytes:
    """ReDoc's bundle with its one request to a CDN, for its logo, made a blank inline image."""
    return (ASSETS_DIR / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, BLANK_IMAGE)


def _root(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - API",
        swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
    )


@router.get(OAUTH2_REDIRECT_URL)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - API",
        redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


@router.get(ASSETS_URL + "/{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFound(f"no documentation asset {name!r}", sorted(ASSETS))
    if name == "redoc.standalone.js":
        return Response(offline_redoc(), media_type=ASSETS[name], headers=CACHE)
    return FileResponse(ASSETS_DIR / name, media_type=ASSETS[name], headers=CACHE)
