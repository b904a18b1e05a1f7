"""The canary section's strings (reports/canary_section.py, _canary.html.j2), merged into reports.i18n's catalogue."""

from __future__ import annotations

# key -> (English, Chinese). Parameters use str.format names.
CANARY_CATALOGUE: dict[str, tuple[str, str]] = {
    "cn_title": ("Canary: baseline vs candidate", "金丝雀发布：基线 vs 候选"),
    "fig_canary": ("Canary: P99 and error rate per window", "金丝雀：各窗口 P99 与错误率"),
    "cn_status_promote": ("PROMOTE", "放量"),
    "cn_status_rollback": ("ROLL BACK", "回滚"),
    "cn_status_no_verdict": ("NO VERDICT", "无结论"),
    "cn_status_incomplete": ("INCOMPLETE", "未完成"),
    "cn_status_running": ("RUNNING", "进行中"),
    "cn_baseline": ("Baseline", "基线"),
    "cn_candidate": ("Candidate", "候选"),
    "cn_plan": (
        "candidate share per stage: {stages}%; {windows} windows of {window_s} s per stage",
        "各阶段候选流量占比：{stages}%；每阶段 {windows} 个窗口，每窗口 {window_s} 秒",
    ),
    "cn_triggers": ("Rollback triggers (judged per window, live)", "回滚触发条件（逐窗口实时判定）"),
    "cn_tr_error_rate": (
        "candidate error rate > {x}% (windows with at least {n} requests)",
        "候选错误率 > {x}%（窗口内至少 {n} 个请求）",
    ),
    "cn_tr_p99_ms": (
        "candidate P99 > {y} ms in {n} consecutive windows",
        "候选 P99 连续 {n} 个窗口 > {y} ms",
    ),
    "cn_tr_p99_increase": (
        "candidate P99 > baseline P99 +{z}% in {n} consecutive windows",
        "候选 P99 连续 {n} 个窗口高于基线 P99 的 {z}% 以上",
    ),
    "cn_tr_agreement": ("mean answer agreement (cosine) < {c}", "答案一致性（余弦均值）< {c}"),
    "cn_tr_temperature": ("candidate device temperature > {temp} °C", "候选设备温度 > {temp} °C"),
    "cn_tr_unavailable": ("candidate unavailable > {s} s per window", "候选每窗口不可用时间 > {s} 秒"),
    "cn_stages": ("Stages side by side", "各阶段对比"),
    "cn_stage": ("Stage", "阶段"),
    "cn_side": ("Side", "一侧"),
    "cn_window": ("Window", "窗口"),
    "cn_p95_ms": ("P95 (ms)", "P95 (ms)"),
    "cn_agreement": ("Agreement: n · mean · min", "一致性：数量 · 均值 · 最小值"),
    "cn_agree_cell": ("{n} · {mean} · {min}", "{n} · {mean} · {min}"),
    "cn_windows": ("Every window", "各窗口"),
    "cn_windows_note": (
        "Figures from every recorded row; the P99 limit and the run of windows over it are what the live "
        "judge saw when it judged the window. Unavailable: baseline / candidate seconds without a successful answer.",
        "图表基于全部记录行；P99 上限与连续超限窗口数为实时判定时所见。不可用：基线 / 候选无成功应答的秒数。",
    ),
    "cn_base_p99": ("Baseline P99 (ms)", "基线 P99 (ms)"),
    "cn_cand_p99": ("Candidate P99 (ms)", "候选 P99 (ms)"),
    "cn_p99_limit": ("P99 limit (ms)", "P99 上限 (ms)"),
    "cn_streak": ("Windows over", "连续超限"),
    "cn_base_err": ("Baseline errors", "基线错误率"),
    "cn_cand_err": ("Candidate errors", "候选错误率"),
    "cn_cand_requests": ("Candidate requests", "候选请求数"),
    "cn_error_limit": ("error-rate trigger", "错误率触发线"),
    "cn_p99_ms": ("P99 (ms)", "P99 (ms)"),
    "cn_error_pct": ("Error rate (%)", "错误率 (%)"),
    "cn_seconds": ("Seconds since the first stage", "自第一阶段起的秒数"),
    "cn_no_windows": ("No window was judged", "没有判定任何窗口"),
}
