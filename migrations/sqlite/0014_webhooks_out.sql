-- 0014: webhooks out (issue 30); see the PostgreSQL file. SQLite's
-- triggers take a WHEN clause instead of a function.
CREATE TABLE webhook_endpoints (
    id                 TEXT     PRIMARY KEY,
    url                TEXT     NOT NULL,
    events             TEXT     NOT NULL,
    description        TEXT     NOT NULL DEFAULT '',
    enabled            BOOLEAN  NOT NULL DEFAULT TRUE,
    disabled_reason    TEXT,
    secret             TEXT     NOT NULL,
    previous_secret    TEXT,
    previous_until     DATETIME,
    failing_since      DATETIME,
    created_at         DATETIME NOT NULL,
    updated_at         DATETIME NOT NULL
);
CREATE INDEX webhook_endpoints_enabled_idx ON webhook_endpoints (enabled);

CREATE TABLE webhook_outbox (
    seq         INTEGER  PRIMARY KEY AUTOINCREMENT,
    type        TEXT     NOT NULL,
    message_id  TEXT,
    status      TEXT,
    recipient   TEXT,
    detail      TEXT,
    created_at  DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

CREATE TABLE webhook_events (
    id          TEXT     PRIMARY KEY,
    type        TEXT     NOT NULL,
    payload     TEXT     NOT NULL,
    created_at  DATETIME NOT NULL
);
CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id             TEXT     PRIMARY KEY,
    endpoint_id    TEXT     NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id       TEXT     NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    event_type     TEXT     NOT NULL,
    attempt        INTEGER  NOT NULL,
    status_code    INTEGER,
    latency_ms     INTEGER  NOT NULL,
    error          TEXT,
    response_body  TEXT,
    next_retry_at  DATETIME,
    created_at     DATETIME NOT NULL
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at, id);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

CREATE TRIGGER messages_webhook_event_insert AFTER INSERT ON messages
WHEN NEW.status IN ('scheduled', 'queued', 'sent', 'failed', 'canceled')
     AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)
BEGIN
    INSERT INTO webhook_outbox (type, message_id, status, detail)
    VALUES ('message.' || NEW.status, NEW.id, NEW.status, NEW.error);
END;

CREATE TRIGGER messages_webhook_event_update AFTER UPDATE OF status, scheduled_at ON messages
WHEN NEW.status IN ('scheduled', 'queued', 'sent', 'failed', 'canceled')
     AND (OLD.status IS NOT NEW.status
          OR (NEW.status = 'scheduled' AND OLD.scheduled_at IS NOT NEW.scheduled_at))
     AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)
BEGIN
    INSERT INTO webhook_outbox (type, message_id, status, detail)
    VALUES ('message.' || NEW.status, NEW.id, NEW.status, NEW.error);
END;

CREATE TRIGGER delivery_events_webhook_event AFTER INSERT ON delivery_events
WHEN NEW.type IN ('delivered', 'bounced', 'complained', 'delayed')
     AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)
BEGIN
    INSERT INTO webhook_outbox (type, message_id, recipient, detail)
    VALUES ('message.' || NEW.type, NEW.message_id, NEW.recipient,
            NULLIF(trim(coalesce(NEW.bounce_type, '') || ' ' || coalesce(NEW.smtp_status, '') || ' ' || coalesce(NEW.diagnostic, '')), ''));
END;

CREATE TRIGGER suppressions_webhook_event AFTER INSERT ON suppressions
WHEN EXISTS (SELECT 1 FROM webhook_endpoints WHERE enabled)
BEGIN
    INSERT INTO webhook_outbox (type, message_id, recipient, detail)
    VALUES ('recipient.suppressed', NEW.message_id, NEW.email, NEW.reason);
END;
