"""Ask the lab: the report's components behind a command line and an HTTP service.

config (the profile's settings) · index (the served index: cached base + atomic incremental adds)
· engine (search, ask, chat) · jobs (ingest worker) · guard (key, rate limit, body limit,
scrubbing) · models (request/response schemas) · app (FastAPI) · static/ (the demo page).
"""
