# syntax=docker/dockerfile:1
# The schedpolicy operator. Build: docker build -t schedpolicy-operator .
# Runs as UID 65532 on a read-only root filesystem; it writes only to /tmp.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/schedpolicy
COPY constraints.txt pyproject.toml README.md ./
COPY operator/ ./operator/
# Pinned by constraints.txt, the same versions the tests ran with.
# pip leaves afterwards: the final stage installs nothing.
RUN /opt/schedpolicy/bin/pip install --no-compile -c constraints.txt . \
    && /opt/schedpolicy/bin/python -m pip uninstall --yes --quiet pip \
    && /opt/schedpolicy/bin/python -m compileall -q /opt/schedpolicy

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="schedpolicy-operator" \
      org.opencontainers.image.description="Keeps pod-deletion-cost, GPU node labels and placement hints in line with SchedulingPolicy objects" \
      org.opencontainers.image.licenses="Apache-2.0"
# No compiler, no pip cache, no source tree: only the virtualenv.
COPY --from=build /opt/schedpolicy /opt/schedpolicy
# A name for UID 65532: kopf asks the password database who runs it (getpass.getuser), and
# the base image knows no such user.
RUN echo 'schedpolicy:x:65532:65532:schedpolicy:/tmp:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'schedpolicy:x:65532:' >> /etc/group
ENV PATH=/opt/schedpolicy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
USER 65532:65532
EXPOSE 8443 8081 9443
# `docker run IMAGE --help` shows the operator's flags; other subcommands need
# `--entrypoint schedpolicy` (for example `... --entrypoint schedpolicy IMAGE crd`).
ENTRYPOINT ["schedpolicy", "run"]
