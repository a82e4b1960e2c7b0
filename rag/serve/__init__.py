"""Ask the lab: the report's components behind a command line and an HTTP service.

The path of one question: ``rag ask``, ``POST /ask``, the MCP server and ``rag.Lab`` all call the
desk (:mod:`rag.serve.desk`), which calls the engine (:mod:`rag.serve.engine`: retrievers,
answerers and the judge over the served index). ``static/`` holds the demo page.

Modules:

- ``app``: FastAPI: the app, its errors, search/ask/chat
- ``commands``: ``rag search/ask/chat/serve``
- ``config``: the profile's settings
- ``desk``: the paper desk's tools, once
- ``desk_commands``: ``rag cites/related/summary/research/mcp``
- ``desk_models``: paper routes' response models
- ``engine``: search, ask, chat
- ``folder_lab``: the lab over a folder of PDFs, through the same desk
- ``guard``: key, rate and body limits
- ``ingest_routes``: ``POST /ingest`` and ``GET /ingest/{job_id}``
- ``index``: served index, atomic adds
- ``jobs``: ingest jobs
- ``mcp_server``: the desk over MCP
- ``models``: request/response schemas
- ``offer``: the models a deployment runs
- ``paper_routes``: the ``/papers`` routes over the desk
- ``research``: a question through the desk's tools
- ``statuses``: the error statuses each route declares
- ``warm``: slow first loads, bounded (503 with Retry-After)
"""
