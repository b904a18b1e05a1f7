"""Every user-visible string of the reports, in English and Chinese. Templates and figures look up keys here."""

from __future__ import annotations

from typing import Any

LANGS: tuple[str, ...] = ("en", "zh")

# key -> (English, Chinese). Parameters use str.format names.
CATALOGUE: dict[str, tuple[str, str]] = {
    "report_title": ("Load test report", "压测报告"),
    "compare_title": ("Run comparison", "运行对比"),
    "run": ("Run", "运行"),
    "scenario": ("Scenario", "场景"),
    "target": ("Target", "目标地址"),
    "model": ("Model", "模型"),
    "device": ("Device", "设备"),
    "precision": ("Precision", "精度"),
    "devices_in_run": ("{n} device(s) in the telemetry", "遥测中共 {n} 个设备"),
    "service_config": ("Service configuration", "服务配置"),
    "host": ("Host", "主机"),
    "versions": ("Versions", "版本"),
    "git": ("Git", "Git"),
    "run_window": ("Run window (UTC)", "运行时间窗 (UTC)"),
    "slo": ("SLO", "SLO"),
    "slo_verdict": ("SLO verdict", "SLO 结论"),
    "verdict_pass": ("met at every step", "所有负载阶梯均满足"),
    "verdict_partial": ("met at some steps only", "仅部分阶梯满足"),
    "verdict_fail": ("not met at any step", "所有阶梯均不满足"),
    "verdict_none": ("no SLO given (pass --slo-p99-ms)", "未设定 SLO（可用 --slo-p99-ms 指定）"),
    "slo_text": ("P99 ≤ {p99} ms, error rate ≤ {budget}", "P99 ≤ {p99} ms，错误率 ≤ {budget}"),
    "incomplete_banner": (
        "This run is incomplete (it crashed or is still running): figures cover the rows recorded so far.",
        "本次运行不完整（崩溃或仍在运行）：图表仅覆盖已记录的数据。",
    ),
    "steps": ("Per load step (steady state, warm-up trimmed)", "各负载阶梯（稳态，已剔除预热）"),
    "step": ("Step", "阶梯"),
    "users": ("Users", "并发用户"),
    "rate": ("Rate (req/s)", "速率 (req/s)"),
    "load": ("Load", "负载"),
    "requests": ("Requests", "请求数"),
    "qps": ("QPS", "QPS"),
    "error_rate": ("Error rate", "错误率"),
    "errors": ("Errors", "错误"),
    "timeouts": ("Timeouts", "超时"),
    "mean": ("Mean", "均值"),
    "max": ("Max", "最大"),
    "p99_ci": ("P99 95% CI", "P99 95% 置信区间"),
    "latency_ms": ("Latency (ms)", "延迟 (ms)"),
    "percentile_note": (
        "Latency percentiles are exact, computed from every ok request with numpy.percentile "
        "(method '{method}'); errors and timeouts are counted separately. The P99 confidence interval is a "
        "seeded bootstrap (2000 resamples) of the nearest-rank P99. Validation probes (endpoint 'validation*') "
        "are expected to fail and are excluded from the error rate.",
        "延迟分位数为精确值：对每个成功请求用 numpy.percentile（方法 '{method}'）计算；错误与超时单独统计。"
        "P99 置信区间为固定种子的自助法（2000 次重采样，最近秩 P99）。校验探针（endpoint 以 'validation' 开头）"
        "预期失败，不计入错误率。",
    ),
    "server_stages": (
        "Server stages and batching (ok rows, mean ms)",
        "服务端阶段与批处理（成功请求，均值 ms）",
    ),
    "queue": ("Queue", "排队"),
    "tokenize": ("Tokenise", "分词"),
    "compute": ("Device compute", "设备计算"),
    "post": ("Post-processing", "后处理"),
    "server_total": ("Server total", "服务端合计"),
    "client_network": ("Client and network", "客户端与网络"),
    "server_other": ("Server other", "服务端其他"),
    "batch_size_mean": ("Batch size (mean)", "批大小（均值）"),
    "batch_size_max": ("Batch size (max)", "批大小（最大）"),
    "decomposition": ("Latency decomposition (mean ms and share of total)", "延迟分解（均值 ms 与占比）"),
    "decomposition_note": (
        "Measured from the Server-Timing header of ok requests; client and network = client latency − server "
        "total. The parts sum to the mean latency.",
        "依据成功请求的 Server-Timing 头测得；客户端与网络 = 客户端延迟 − 服务端合计。各部分之和等于平均延迟。",
    ),
    "no_server_timing": ("The target sent no Server-Timing header.", "目标服务未返回 Server-Timing 头。"),
    "total": ("Total", "合计"),
    "telemetry": ("Telemetry per step (steady window)", "各阶梯遥测（稳态时间窗）"),
    "device_util": ("Device util. mean / max (%)", "设备利用率 均值/最大 (%)"),
    "mem_bw": ("Memory bandwidth util. (%)", "内存带宽利用率 (%)"),
    "temp_max": ("Temperature max (°C)", "最高温度 (°C)"),
    "power_mean": ("Power mean per device (W)", "单卡平均功耗 (W)"),
    "mem_used": ("Device memory max (MB / %)", "设备内存最大 (MB / %)"),
    "generator_cpu": ("Generator CPU mean (%)", "压测机 CPU 均值 (%)"),
    "service_cpu": ("Service CPU mean (%)", "服务 CPU 均值 (%)"),
    "service_busy": (
        "Inference worker busy mean / max (%) — device utilisation as the service measures it",
        "推理线程忙碌 均值 / 最大 (%) — 服务自测的设备利用率",
    ),
    "open_loop": ("Open loop: latency from intended send time", "开环：自计划发送时刻起的延迟"),
    "open_loop_note": (
        "Measured from when each request was scheduled, so a generator or server stall counts against latency "
        "(free of coordinated omission).",
        "从每个请求的计划发送时刻计时，压测机或服务端的停顿都计入延迟（无协同遗漏）。",
    ),
    "late": ("Late (>10 ms)", "延迟发送 (>10 ms)"),
    "lateness_p99": ("Lateness P99 (ms)", "发送滞后 P99 (ms)"),
    "dropped": ("Never sent", "未发送"),
    "figures": ("Figures", "图表"),
    "capacity": ("Capacity", "容量"),
    "max_qps_slo": ("Highest QPS meeting the SLO", "满足 SLO 的最高 QPS"),
    "at_load": ("at load {load}", "对应负载 {load}"),
    "none_meets": ("no step meets the SLO", "没有阶梯满足 SLO"),
    "knee": ("Knee", "拐点"),
    "knee_rule": (
        "Knee rule: the first step after which the next step adds less than 10% throughput while its P99 rises "
        "more than 20%.",
        "拐点规则：从该阶梯到下一阶梯，吞吐增长不足 10%，而 P99 上升超过 20%。",
    ),
    "knee_not_reached": ("not reached in the tested range", "测试范围内未出现"),
    "peak_qps": ("Peak QPS", "峰值 QPS"),
    "little": ("Little's law check (closed loop)", "Little 定律校验（闭环）"),
    "little_note": (
        "users ≈ QPS × (mean latency + think time); a mismatch above 15% suggests the load generator, not the "
        "service, limited the load.",
        "用户数 ≈ QPS ×（平均延迟 + 思考时间）；偏差超过 15% 说明压测机而非服务限制了负载。",
    ),
    "expected_users": ("QPS × latency", "QPS × 延迟"),
    "mismatch": ("Mismatch", "偏差"),
    "flagged": ("generator bottleneck?", "压测机瓶颈？"),
    "consistent": ("consistent", "一致"),
    "devices_needed": ("Devices for a target", "目标所需设备数"),
    "plan_text": (
        "For {target} QPS with {headroom} headroom: {replicas} replica(s) of this configuration "
        "({devices_per} device(s) each) = {devices} device(s), assuming {usable} usable QPS per replica.",
        "目标 {target} QPS、预留 {headroom} 余量：需要本配置 {replicas} 个副本（每个 {devices_per} 张卡），"
        "共 {devices} 张卡；按每副本可用 {usable} QPS 计算。",
    ),
    "plan_hint": (
        "Run `embedperf capacity RUN --target-qps N --headroom 0.25` for the devices needed for a target.",
        "运行 `embedperf capacity RUN --target-qps N --headroom 0.25` 计算目标所需设备数。",
    ),
    "health": ("Health checks per step", "各阶梯健康检查"),
    "health_temp_c": ("Temperature < {limit} °C", "温度 < {limit} °C"),
    "health_mem_pct": ("Device memory < {limit}%", "设备内存 < {limit}%"),
    "health_error_rate": ("Error rate < {limit}", "错误率 < {limit}"),
    "health_mean_latency_ms": ("Mean latency < {limit} ms", "平均延迟 < {limit} ms"),
    "status_pass": ("pass", "通过"),
    "status_warn": ("warn", "警告"),
    "status_n/a": ("n/a", "无数据"),
    "soak": ("Soak trends", "长稳趋势"),
    "soak_p50_slope": ("P50 drift (ms/h)", "P50 漂移 (ms/h)"),
    "soak_p99_slope": ("P99 drift (ms/h)", "P99 漂移 (ms/h)"),
    "soak_error": ("Error rate first / second half", "前半程 / 后半程错误率"),
    "soak_rss": ("Service memory slope (MB/h)", "服务内存增长 (MB/h)"),
    "soak_verdict": ("Verdict", "结论"),
    "soak_stable": ("stable", "稳定"),
    "soak_degrading": ("degrading", "劣化"),
    "quality": ("Data quality", "数据质量"),
    "quality_ok": ("No data-quality problems found.", "未发现数据质量问题。"),
    "f_incomplete_run": (
        "The run is incomplete (manifest complete = false).",
        "运行不完整（manifest complete = false）。",
    ),
    "f_generator_saturated": (
        "The load generator was CPU-saturated (max {max_pct}% ≥ {threshold_pct}%): latency and QPS may be "
        "limited by the generator, not the service.",
        "压测机 CPU 饱和（最高 {max_pct}% ≥ {threshold_pct}%）：延迟与 QPS 可能受压测机限制，而非服务。",
    ),
    "f_shared_host": (
        "The load generator shares this host with the service (generator CPU mean {mean_pct}%): figures are "
        "for this host and configuration only, not universal.",
        "压测机与服务共用本主机（压测机 CPU 均值 {mean_pct}%）：数据仅代表本主机与本配置，不具普适性。",
    ),
    "f_open_loop_late": (
        "Step {step}: {late} of {n} requests were sent more than 10 ms late ({dropped} never sent).",
        "阶梯 {step}：{n} 个请求中 {late} 个发送滞后超过 10 ms（{dropped} 个未发送）。",
    ),
    "f_no_samples": ("Step {step} has no requests.", "阶梯 {step} 没有请求。"),
    "f_few_samples_p99": (
        "Step {step} has only {n} ok samples: too few for a stable P99 (< 100).",
        "阶梯 {step} 仅有 {n} 个成功样本：不足以得到稳定的 P99（< 100）。",
    ),
    "f_few_samples_p999": (
        "Step {step} has only {n} ok samples: too few for a stable P99.9 (< 1000).",
        "阶梯 {step} 仅有 {n} 个成功样本：不足以得到稳定的 P99.9（< 1000）。",
    ),
    "f_collector_not_ok": (
        "Telemetry source {name}: {status} — {reason}",
        "遥测源 {name}：{status} — {reason}",
    ),
    "f_no_telemetry": (
        "No telemetry in this run: device and host columns are empty.",
        "本次运行没有遥测数据：设备与主机列为空。",
    ),
    "f_telemetry_gap": (
        "Telemetry source {source} is missing {missing_s} s.",
        "遥测源 {source} 缺失 {missing_s} 秒。",
    ),
    "f_dropped_outside_stage": (
        "{n} request rows fall outside every recorded stage and were left out.",
        "{n} 条请求记录不属于任何已记录阶梯，已剔除。",
    ),
    "f_dropped_null_latency": (
        "{n} ok request rows have no latency and were left out.",
        "{n} 条成功请求记录缺少延迟，已剔除。",
    ),
    "disclaimer": (
        "Figures measured on one host with one configuration; they are not universal. The load generator ran on "
        "the same host as the service unless the manifest says otherwise.",
        "数据来自单台主机与单一配置，不具普适性。除非 manifest 另有说明，压测机与服务运行在同一主机上。",
    ),
    "notes": ("Notes", "备注"),
    "warmup_trimmed": ("Warm-up rows trimmed", "已剔除预热请求"),
    "fig_percentiles": ("Latency percentiles vs load", "各负载下的延迟分位数"),
    "fig_throughput": ("Throughput vs load", "各负载下的吞吐"),
    "fig_timeseries": ("Time series (steps shaded)", "时间序列（阴影为负载阶梯）"),
    "fig_cdf": ("Latency CDF per step", "各阶梯延迟 CDF"),
    "fig_batch": ("Batch size distribution per step", "各阶梯批大小分布"),
    "fig_decomposition": ("Latency decomposition per step", "各阶梯延迟分解"),
    "fig_soak": ("Per-minute latency (soak)", "每分钟延迟（长稳）"),
    "ax_time_s": ("Time since start (s)", "自开始以来的时间 (s)"),
    "ax_share": ("Share of requests", "请求占比"),
    "ax_batch": ("Batch size", "批大小"),
    "ax_cdf": ("Cumulative fraction", "累积比例"),
    "ax_device_util": ("Device util. %", "设备利用率 %"),
    "ax_mem_bw": ("Mem. BW %", "内存带宽 %"),
    "ax_temp": ("Temp. max °C", "最高温度 °C"),
    "ax_power": ("Power total W", "总功耗 W"),
    "ax_queue": ("Queue depth", "队列深度"),
    "ax_minute": ("Minute", "分钟"),
    "knee_label": ("knee", "拐点"),
    "slo_label": ("SLO", "SLO"),
    "yes": ("yes", "是"),
    "no": ("no", "否"),
    "meets_slo": ("Meets SLO", "满足 SLO"),
    # comparison
    "baseline": ("Baseline", "基线"),
    "candidate": ("Candidate", "候选"),
    "metric": ("Metric", "指标"),
    "change": ("Change", "变化"),
    "ci95": ("95% CI", "95% 置信区间"),
    "verdict": ("Verdict", "结论"),
    "better": ("better", "更好"),
    "worse": ("worse", "更差"),
    "no_sig": ("no significant difference", "无显著差异"),
    "overall": ("Overall", "总体"),
    "summary_table": ("Optimisation | QPS gain | resource saving", "优化项 | QPS 提升 | 资源节省"),
    "qps_gain": ("Peak QPS gain", "峰值 QPS 提升"),
    "p99_change": ("P99 change at peak", "峰值处 P99 变化"),
    "resource_change": ("Device util. change", "设备利用率变化"),
    "cpu_change": ("Service CPU change", "服务 CPU 变化"),
    "mem_change": ("Device memory change", "设备内存变化"),
    "gate": ("Gate", "门禁"),
    "gate_rule": (
        "A gate fails when the point estimate crosses its threshold and the 95% confidence interval of the "
        "change excludes zero.",
        "当点估计越过阈值且变化量的 95% 置信区间不含 0 时，门禁失败。",
    ),
    "gate_pass": ("pass", "通过"),
    "gate_fail": ("FAIL", "失败"),
    "mismatch_warning": (
        "The runs differ in {what}: the comparison may reflect the environment, not the change.",
        "两次运行的 {what} 不同：对比结果可能反映环境差异而非改动本身。",
    ),
    # optimisation matrix
    "matrix_title": ("Optimisation matrix", "优化矩阵"),
    "configuration": ("Configuration", "配置"),
    "description": ("Description", "说明"),
    "qps_at_slo": ("QPS at the SLO", "满足 SLO 的 QPS"),
    "change_vs_baseline": ("change vs baseline", "相对基线"),
    "precision_check": ("Precision (mean cosine vs fp32)", "精度（与 fp32 的平均余弦）"),
    "precision_reference": ("fp32 reference", "fp32 基准"),
    "recommendation": ("Recommendation", "推荐"),
    "recommend_text": (
        "{name}: the most QPS at the SLO ({qps} req/s) among configurations that pass the precision gate.",
        "{name}：在通过精度门禁的配置中，满足 SLO 时 QPS 最高（{qps} req/s）。",
    ),
    "recommend_peak_text": (
        "No configuration met the SLO at any step. Highest peak QPS that passes the precision gate: {name} ({qps} req/s).",
        "没有配置在任何阶梯满足 SLO。通过精度门禁的最高峰值 QPS：{name}（{qps} req/s）。",
    ),
    "recommend_none": (
        "No configuration completed and passed the precision gate.",
        "没有配置完成运行并通过精度门禁。",
    ),
    "precision_excluded": (
        "Failed the precision gate, so never recommended: {names}.",
        "未通过精度门禁，不予推荐：{names}。",
    ),
    "per_step_changes": ("P50 / P99 change at each load step", "各负载阶梯 P50 / P99 变化"),
    "repeat": ("repeat", "重复"),
    "repeats_note": (
        "Each configuration ran {n} time(s) in rotated order. A change is called better or worse only when every "
        "repeat's 95% CI agrees; otherwise it is 'no significant difference'.",
        "每个配置以轮换顺序运行 {n} 次。只有所有重复的 95% 置信区间一致时才判定更好或更差，否则为“无显著差异”。",
    ),
    "failed_runs": ("Runs that failed", "失败的运行"),
    "fig_matrix": ("Configurations overlaid", "各配置叠加对比"),
    "cache_hit_ratio": ("cache hit ratio", "缓存命中率"),
    "compare_note": (
        "Steps are matched by stage index. Overall: QPS is each run's peak, latency is measured at the step where the "
        "baseline peaked (pooling all steps would mix loads). Changes are candidate − baseline; percentile CIs are a seeded "
        "bootstrap of the difference (2000 resamples), QPS CIs resample per-second throughput.",
        "阶梯按序号匹配。总体：QPS 取各自峰值，时延取基线达到峰值的阶梯（混合所有阶梯会混淆负载）。变化量为 候选 − 基线；分位数置信区间为差值的固定种子自助法（2000 次），QPS 置信区间对每秒吞吐重采样。",
    ),
}


def t(key: str, lang: str = "en", **params: Any) -> str:
    """The string for key in lang (English if lang is unknown), formatted with params."""
    pair = CATALOGUE.get(key)
    if pair is None:
        return key
    text = pair[1] if lang == "zh" else pair[0]
    if params:
        try:
            return text.format(**{k: ("—" if v is None else v) for k, v in params.items()})
        except (KeyError, IndexError, ValueError):
            return text
    return text
