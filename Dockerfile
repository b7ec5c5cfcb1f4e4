# syntax=docker/dockerfile:1
# A static binary (the embedded SQLite driver is pure Go: no cgo) on a
# distroless base that runs as an unprivileged user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/nornweave ./cmd/nornweave

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/nornweave /usr/local/bin/nornweave
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/nornweave"]
CMD ["serve"]
