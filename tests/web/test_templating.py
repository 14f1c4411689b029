"""Every template compiles ahead of its first view (`compile_templates`, run
once `arbiter serve` serves), and is then served from the environment's cache."""

from arbiter.web.templating import compile_templates, environment


def test_every_template_is_compiled_and_cached() -> None:
    environment.cache_clear()  # a fresh environment: nothing rendered in it yet
    compile_templates()
    env = environment()
    names = env.list_templates()
    assert {"run.html", "base.html"} <= set(names)
    assert env.cache is not None
    cached = {template.name for template in env.cache.values()}
    assert set(names) <= cached
