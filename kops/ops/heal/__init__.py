"""Self-healing (``kops heal step | status``): anomalies noticed, remembered in the cluster and
mended by bounded steps run from cron. :mod:`.anomalies` and :mod:`.decide` are pure; :mod:`.memory`
keeps the anomalies in kops' journal topic; :mod:`.step` is the cron run."""
