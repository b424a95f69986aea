"""Telling the world outside: signed webhooks, Slack-compatible notifications and e-mail
follow-up, all through one outbox table (``deliveries``) delivered with retries."""
