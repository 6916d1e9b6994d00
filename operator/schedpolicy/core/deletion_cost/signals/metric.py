"""Metric: points by a per-pod gauge, read from the pod's Prometheus endpoint or from an
annotation, mapped to bands. A sample that cannot be trusted holds the pod's cost. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import ConfigDict, Field, model_validator

from schedpolicy.core.deletion_cost.samples import Rejection, check
from schedpolicy.core.deletion_cost.signals.base import PodFacts, Score, SignalKind
from schedpolicy.core.policy.model import Model, Points, cel, validations


class PrometheusSource(Model):
    """Scrape a Prometheus text endpoint on the pod's IP."""

    port: Annotated[int, Field(ge=1, le=65535)] = Field(description="Port on the pod.")
    path: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^/")] = Field(
        default="/metrics", description="HTTP path of the endpoint."
    )
    metric: Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$", max_length=200)] = Field(
        description="Name of the gauge to read."
    )
    timeout_seconds: Annotated[float, Field(gt=0, le=5)] = Field(
        default=1.0, description="Bound on each scrape; a slower endpoint counts as no sample."
    )


class AnnotationSource(Model):
    """Read a JSON sample `{"value": ..., "observedAt": RFC3339, "podUID": ...}` from a pod
    annotation that the application (or a sidecar) keeps up to date."""

    key: Annotated[str, Field(min_length=1, max_length=317)] = Field(
        default="schedpolicy.io/metric", description="The annotation key holding the sample."
    )


class MetricBand(Model):
    min: Annotated[float, Field(ge=0)] = Field(
        description="Lower bound (inclusive) of the band: samples >= min get its points."
    )
    points: Points = Field(description="Points for samples in this band.")


class MetricSignal(Model):
    """Points by a per-pod gauge, such as active connections, mapped to bands. A sample that is
    stale, future-dated, not finite, negative or for another pod UID changes nothing: the
    pod keeps the cost it has."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.prometheus) != has(self.annotation)",
                "exactly one of prometheus and annotation must be set",
            ),
            cel(
                "self.bands.all(b, self.bands.exists_one(c, c.min == b.min))",
                "band minimums must be distinct",
                ".bands",
            ),
        )
    )

    prometheus: PrometheusSource | None = Field(
        default=None, description="Read the gauge from the pod's Prometheus endpoint."
    )
    annotation: AnnotationSource | None = Field(
        default=None, description="Read the gauge from a pod annotation."
    )
    max_age_seconds: Annotated[int, Field(ge=1, le=86_400)] = Field(
        default=60, description="Samples older than this are stale and ignored."
    )
    bands: list[MetricBand] = Field(
        min_length=1,
        max_length=32,
        description="Bands by lower bound; a sample gets the points of the highest band it reaches"
        " (0 below the lowest).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.prometheus is None) == (self.annotation is None):
            raise ValueError("exactly one of prometheus and annotation must be set")
        mins = [b.min for b in self.bands]
        if len(set(mins)) != len(mins):
            raise ValueError("band minimums must be distinct")
        return self

    def source_key(self) -> str:
        """Where the samples come from, as a key: two signals that read the same source read
        the same samples."""
        if self.annotation is not None:
            return f"annotation:{self.annotation.key}"
        assert self.prometheus is not None  # _one_source
        src = self.prometheus
        return f"prometheus:{src.port}{src.path}#{src.metric}"


def band_points(params: MetricSignal, value: float) -> tuple[int, str]:
    reached = [b for b in params.bands if value >= b.min]
    if not reached:
        return 0, "below the lowest band"
    band = max(reached, key=lambda b: b.min)
    return band.points, f"band >= {band.min:g}"


def score(params: MetricSignal, facts: PodFacts, now: datetime) -> Score | Rejection:
    found = facts.sample(params)
    if found is None:
        return Rejection("no-sample", "no sample has been read yet")
    if isinstance(found, Rejection):
        return found
    rejected = check(found, facts.pod_uid, now, timedelta(seconds=params.max_age_seconds))
    if rejected is not None:
        return rejected
    points, band = band_points(params, found.value)
    name = params.prometheus.metric if params.prometheus else "sample"
    return Score(points, f"{name} = {found.value:g} ({band})")


KIND = SignalKind("Metric", "metric", MetricSignal, score)
