"""NATS: connecting, the permission model, the embedded server and provisioning."""
