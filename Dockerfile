# syntax=docker/dockerfile:1
# A static binary (the embedded SQLite driver is pure Go: no cgo) on a
# distroless base, run as the unprivileged "nonroot" user (uid 65532).
# .dockerignore keeps .git, bin/, data/, databases and .env out of the
# build context. SIGTERM drains the sends in flight: give the container
# more than the longest send lease before SIGKILL (docker stop -t,
# compose's stop_grace_period), not Docker's default 10 s.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/nornweave ./cmd/nornweave \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/nornweave /usr/local/bin/nornweave
# The default SQLite database lives in ./data: owned by the user that
# writes it, and a volume so that it outlives the container.
COPY --from=build --chown=65532:65532 /out/data /app/data
VOLUME ["/app/data"]
USER 65532:65532
EXPOSE 8000
# distroless has no curl: the binary asks its own /health, on PORT and
# HOST, or the --port and --host the server (PID 1) was started with.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/nornweave", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/nornweave"]
CMD ["serve"]
