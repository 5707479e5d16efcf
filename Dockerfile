# realmgate gateway on Node 24, which runs the TypeScript sources as they are (type stripping):
# no build step, no loader, no tsx. The image contains no Keycloak and no Java: set KEYCLOAK_URL
# to an external Keycloak (docker-compose.yml does). Outside demo mode KEYCLOAK_ADMIN_PASSWORD
# and KEYCLOAK_CLIENT_SECRET are required. test/unit/dockerfile.test.ts keeps this file in step
# with package.json and src/; the compose suite (npm run test:compose) builds and runs it.
# NODE_IMAGE: the upstream image by default; CI builds a stand-in of it (ops/images/).
ARG NODE_IMAGE=node:24-bookworm-slim
FROM ${NODE_IMAGE}

# What this image is (OCI annotations, `docker inspect` shows them), from build arguments:
# scripts/release.sh passes them, and so does docker-compose.yml from the host's variables of the
# same names; a build without them says "unknown". REALMGATE_VERSION, when given, must be
# package.json's (checked), REALMGATE_REVISION the commit built (it stays in the
# environment: the image holds no .git, and the start log and realmgate_build_info read it),
# REALMGATE_SOURCE where that commit can be fetched, REALMGATE_CREATED the build time (RFC 3339).
# Each ARG is declared where it is first used: a RUN after an ARG whose value changed is built
# again, and the revision changes with every commit.

ENV NODE_ENV=production
WORKDIR /app

# Runtime dependencies only: every package src/ imports is in "dependencies" (the test checks).
COPY package.json package-lock.json ./
# A version label that is not the code's version would mislead whoever reads it: refused.
ARG REALMGATE_VERSION=unknown
RUN node -e 'const v = require("./package.json").version, a = process.argv[1]; if (a !== "unknown" && a !== v) { console.error(`REALMGATE_VERSION ${a} differs from package.json (${v})`); process.exit(1); }' "${REALMGATE_VERSION}"
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY src/ ./src/
COPY keycloak/ ./keycloak/
COPY realm-export/ ./realm-export/

# DATA_DIR (default .data) must be writable by the unprivileged user.
RUN mkdir -p /app/.data && chown node:node /app/.data

ARG REALMGATE_REVISION=unknown
ARG REALMGATE_SOURCE=unknown
ARG REALMGATE_CREATED=unknown
LABEL org.opencontainers.image.title="realmgate" \
      org.opencontainers.image.description="Authentication gateway in front of Keycloak" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${REALMGATE_VERSION}" \
      org.opencontainers.image.revision="${REALMGATE_REVISION}" \
      org.opencontainers.image.source="${REALMGATE_SOURCE}" \
      org.opencontainers.image.created="${REALMGATE_CREATED}"

ENV REALMGATE_REVISION=${REALMGATE_REVISION}

USER node

EXPOSE 8000 8001

HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8000) + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

CMD ["node", "src/main.ts"]
