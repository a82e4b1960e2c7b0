"""The report: profiles, the papermill runner, scrubbing and publishing, the metrics recorder."""
