"""The container lane: deploy/ built with podman and run for real (deploy/README.md)."""
