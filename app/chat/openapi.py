"""The OpenAPI 3.1 document of the chat API (served at /api/v1/openapi.json).

Written by hand next to the code it describes; ``tests/test_chat_openapi.py`` validates real
responses of every endpoint against these schemas, so the two cannot drift apart silently.
"""

from __future__ import annotations

from typing import Any

from app.chat.text import MAX_MESSAGE_CHARS

_NULLABLE_STRING = {"type": ["string", "null"]}
_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_RATE_LIMITED = {
    **_error("Too many requests from this client."),
    "headers": {
        "Retry-After": {
            "description": "Seconds until the limit resets.",
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}

_COMMON_ERRORS = {
    "400": _error("Malformed JSON, a field of the wrong type, or an invalid message."),
    "403": _error(
        "Cross-origin request from a site that is not allowed, or a customer identity whose "
        "hash does not verify (identity_invalid)."
    ),
    "413": _error("Body larger than 64 KiB."),
    "415": _error("Body is not application/json."),
    "429": _RATE_LIMITED,
}

# Optional on every call: a customer identity signed by the host site's server.
_IDENTITY_HEADERS = [
    {
        "name": "X-Tierdesk-Customer-Id",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "maxLength": 200},
    },
    {
        "name": "X-Tierdesk-Customer-Hash",
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "hex HMAC-SHA256 of the customer id under TIERDESK_IDENTITY_SECRET",
    },
]

SCHEMAS: dict[str, Any] = {
    "CustomerConversations": {
        "type": "object",
        "required": ["conversations"],
        "properties": {
            "conversations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["conversation_id", "created_at", "status"],
                    "properties": {
                        "conversation_id": {"type": "string"},
                        "created_at": {"type": "string"},
                        "status": {"type": "string"},
                    },
                },
            }
        },
    },
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "description": "Stable machine-readable code."},
                    "message": {"type": "string", "description": "For people."},
                },
            }
        },
    },
    "ArticleRef": {
        "type": "object",
        "required": ["slug", "title", "url"],
        "additionalProperties": False,
        "properties": {
            "slug": {"type": "string"},
            "title": {"type": "string"},
            "url": {"type": "string", "description": "Path of the public article page."},
        },
    },
    "Suggestion": {
        "type": "object",
        "required": ["slug", "title"],
        "additionalProperties": False,
        "properties": {"slug": {"type": "string"}, "title": {"type": "string"}},
    },
    "Answer": {
        "type": "object",
        "required": ["text", "html", "article"],
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "description": "The article as plain text."},
            "html": {"type": "string", "description": "The article's sanitised HTML."},
            "article": _ref("ArticleRef"),
        },
    },
    "ChatRequest": {
        "type": "object",
        "required": ["message"],
        "properties": {
            "message": {
                "type": "string",
                "description": f"1 to {MAX_MESSAGE_CHARS} characters once control characters "
                "are removed and the text is trimmed.",
            },
            "conversation_id": {
                **_NULLABLE_STRING,
                "description": "Continue this conversation (omit to start one).",
            },
            "handoff": {
                "type": "boolean",
                "default": False,
                "description": "The customer asked for a person.",
            },
        },
    },
    "ChatResponse": {
        "type": "object",
        "required": [
            "conversation_id",
            "message_id",
            "status",
            "answer",
            "confidence",
            "route",
            "suggestions",
        ],
        "additionalProperties": False,
        "properties": {
            "conversation_id": _ID,
            "message_id": {
                **_ID,
                "description": "The bot's message (the target of feedback); the customer's own "
                "message while a person holds the conversation (status with_person).",
            },
            "status": {"type": "string", "enum": ["answered", "pending_review", "with_person"]},
            "answer": {"oneOf": [_ref("Answer"), {"type": "null"}]},
            "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "route": {"type": ["string", "null"], "enum": ["simple", "complex", None]},
            "suggestions": {"type": "array", "items": _ref("Suggestion")},
            "asked_for_person": {
                "type": "boolean",
                "description": "The customer asked for a person, with handoff or in words "
                '("I want to talk to a human"): the turn is pending_review for that reason.',
            },
        },
    },
    "Message": {
        "type": "object",
        "required": [
            "id",
            "role",
            "seq",
            "text",
            "html",
            "article",
            "status",
            "in_reply_to",
            "created_at",
            "feedback",
        ],
        "additionalProperties": False,
        "properties": {
            "id": _ID,
            "role": {"type": "string", "enum": ["customer", "bot", "agent"]},
            "seq": {"type": "integer"},
            "text": {"type": "string"},
            "html": {**_NULLABLE_STRING, "description": "Sanitised article HTML, if any."},
            "article": {"oneOf": [_ref("ArticleRef"), {"type": "null"}]},
            "status": {
                "type": ["string", "null"],
                "enum": ["answered", "pending_review", None],
                "description": "Bot messages only.",
            },
            "in_reply_to": _NULLABLE_STRING,
            "created_at": {"type": ["string", "null"], "format": "date-time"},
            "feedback": {
                "type": ["boolean", "null"],
                "description": "The customer's vote on this answer (helpful or not), null "
                "while there is none; voting again changes it.",
            },
        },
    },
    "Conversation": {
        "type": "object",
        "required": ["conversation_id", "status", "awaiting_person", "created_at", "messages"],
        "additionalProperties": False,
        "properties": {
            "conversation_id": _ID,
            "status": {"type": "string", "enum": ["open", "pending_review"]},
            "awaiting_person": {
                "type": "boolean",
                "description": "A person has yet to answer (poll until false).",
            },
            "handoff": _ref("Handoff"),
            "created_at": {"type": ["string", "null"], "format": "date-time"},
            "messages": {"type": "array", "items": _ref("Message")},
        },
    },
    "Handoff": {
        "type": "object",
        "required": ["state", "agent", "people_available", "back_at", "email"],
        "additionalProperties": False,
        "properties": {
            "state": {"type": "string", "enum": ["bot", "pending", "with_person", "resolved"]},
            "agent": {**_NULLABLE_STRING, "description": "Who is answering (with_person)."},
            "people_available": {
                "type": "boolean",
                "description": "False outside the configured business hours.",
            },
            "back_at": {"type": ["string", "null"], "format": "date-time"},
            "email": {"type": "boolean", "description": "The customer left an e-mail address."},
        },
    },
    "EmailRequest": {
        "type": "object",
        "required": ["email"],
        "properties": {"email": {"type": "string", "maxLength": 320}},
    },
    "FeedbackRequest": {
        "type": "object",
        "required": ["helpful"],
        "properties": {"helpful": {"type": "boolean"}, "comment": _NULLABLE_STRING},
    },
    "FeedbackResponse": {
        "type": "object",
        "required": ["feedback_id", "message_id", "helpful", "escalated", "conversation_status"],
        "additionalProperties": False,
        "properties": {
            "feedback_id": {"type": "integer"},
            "message_id": _ID,
            "helpful": {"type": "boolean"},
            "escalated": {
                "type": "boolean",
                "description": "The question went to a person because of this vote.",
            },
            "conversation_status": {"type": "string", "enum": ["open", "pending_review"]},
        },
    },
}


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tierdesk chat API",
            "version": "1.0.0",
            "description": "Ask the support bot, read a conversation (with replies from people "
            "that arrive later) and rate answers. Every error is "
            '{"error": {"code", "message"}}.',
        },
        "servers": [{"url": "/api/v1"}],
        "paths": {
            "/chat": {
                "post": {
                    "operationId": "chat",
                    "summary": "Send a customer message; get an answer or a pending hand-off.",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("ChatRequest")}},
                    },
                    "responses": {
                        "200": _json(_ref("ChatResponse"), "Answered, or sent to a person."),
                        "404": _error("Unknown conversation_id."),
                        **_COMMON_ERRORS,
                    },
                }
            },
            "/conversations/{conversation_id}": {
                "get": {
                    "operationId": "getConversation",
                    "summary": "A conversation's messages, including later replies of people.",
                    "parameters": [
                        {
                            "name": "conversation_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": _json(_ref("Conversation"), "The conversation."),
                        "404": _error("Unknown conversation."),
                        "403": _COMMON_ERRORS["403"],
                        "429": _RATE_LIMITED,
                    },
                }
            },
            "/conversations/{conversation_id}/events": {
                "get": {
                    "operationId": "conversationEvents",
                    "summary": "Server-sent events: a person's replies, typing, handoff state.",
                    "parameters": [
                        {
                            "name": "conversation_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "An event stream; each event's data is a JSON "
                            'object with a "type": hello, message, typing, state or resync.',
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        "404": _error("Unknown conversation."),
                        "503": _error("Live updates are not served here: poll instead."),
                        "403": _COMMON_ERRORS["403"],
                        "429": _RATE_LIMITED,
                    },
                }
            },
            "/conversations/{conversation_id}/email": {
                "post": {
                    "operationId": "conversationEmail",
                    "summary": "Leave an e-mail address for the replies of a person.",
                    "parameters": [
                        {
                            "name": "conversation_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("EmailRequest")}},
                    },
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["conversation_id", "email"],
                                "properties": {
                                    "conversation_id": _ID,
                                    "email": {"type": "boolean"},
                                },
                            },
                            "Stored.",
                        ),
                        "404": _error("Unknown conversation."),
                        **_COMMON_ERRORS,
                    },
                }
            },
            "/messages/{message_id}/feedback": {
                "post": {
                    "operationId": "feedback",
                    "summary": "Rate an answer; 'not helpful' sends the question to a person.",
                    "parameters": [
                        {
                            "name": "message_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("FeedbackRequest")}},
                    },
                    "responses": {
                        "200": _json(_ref("FeedbackResponse"), "Stored."),
                        "404": _error("Unknown message."),
                        "409": _error("The message is not an answer (a question, or pending)."),
                        **_COMMON_ERRORS,
                    },
                }
            },
            "/customer/conversations": {
                "get": {
                    "operationId": "customerConversations",
                    "summary": "A verified customer's conversations, newest first (history on "
                    "any device). Needs the X-Tierdesk-Customer-Id and X-Tierdesk-Customer-Hash "
                    "headers (docs/privacy.md).",
                    "parameters": _IDENTITY_HEADERS,
                    "responses": {
                        "200": _json(_ref("CustomerConversations"), "The conversations."),
                        "401": _error("No verified customer identity was sent."),
                        "403": _COMMON_ERRORS["403"],
                        "429": _RATE_LIMITED,
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document.",
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1 document.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {"schemas": SCHEMAS},
    }
