// SPDX-License-Identifier: GPL-3.0-or-later
//
// Flamenco job type "Face Fusion (Blender scene)": a saved .blend with Face Fusion strips or Compositor nodes.
// Task "analyse-shot" runs `bpy.ops.facefusion.farm_analyse()` headless, which writes one shot analysis file per
// Face Fusion strip or node into the job's analysis folder next to the render output (each names its plate relative
// to itself, so a worker that mounts the storage elsewhere still finds it current). The render tasks then run
// `blender -b` over frame chunks: `bpy.ops.facefusion.farm_bake` bakes the chunk's frames with the engine, every bake
// reading its target's analysis file and never analysing, then Blender renders them (the add-on's batch-render
// handlers would bake anything still missing). A missing or stale file fails the task with the engine's message
// (`--python-exit-code 1`), no frame rendered.
//
// Install: copy into the `scripts` folder next to the flamenco-manager executable; the workers' Blender needs the
// Face Fusion extension. The engine's Python and folder come from the Manager's two-way variables
// `facefusion_python` and `facefusion_root` (or the job settings).
// Commands: Flamenco's `blender-render` (parameters exe, exeArgs, argsBefore, blendfile, args: the worker runs
// exe + exeArgs + argsBefore + blendfile + args). Runs in the Manager's goja engine: plain ES2015, no modules.

const JOB_TYPE = {
    label: "Face Fusion (Blender scene)",
    description: "Render a scene with Face Fusion strips or nodes: one analysis task, then chunked renders",
    settings: [
        { key: "frames", type: "string", required: true, eval: "f'{C.scene.frame_start}-{C.scene.frame_end}'",
          evalInfo: { showLinkButton: true, description: "Scene frame range" },
          description: "Frames to render, e.g. '1-48'" },
        { key: "chunk_size", type: "int32", default: 8, visible: "submission", description: "Frames per task" },
        { key: "render_output", type: "string", subtype: "file_path", editable: false,
          eval: "abspath(C.scene.render.filepath)", description: "The scene's render output (// made absolute)" },
        { key: "engine_python", type: "string", default: "{facefusion_python}", visible: "submission",
          description: "Face Fusion engine Python on the workers" },
        { key: "engine_root", type: "string", default: "{facefusion_root}", visible: "submission",
          description: "Face Fusion engine folder on the workers" },
        { key: "models_dir", type: "string", default: "", visible: "submission",
          description: "Engine models folder on the workers (empty: the engine's default)" },
        { key: "consent_file", type: "string", default: "", visible: "submission",
          description: "The shot's consent store for the engine (empty: the workers' own)" },
        { key: "scene", type: "string", required: true, eval: "C.scene.name", visible: "web",
          description: "The scene to analyse and render" },
        // Filled in by the Flamenco add-on:
        { key: "blendfile", type: "string", required: true, visible: "web", description: "The .blend to render" },
    ],
};

// Sets the engine's environment from the arguments after "--" (NAME VALUE pairs), so every path reaches Blender
// as a whole argument that Flamenco's two-way variables map per platform, never inside Python source.
const SETUP = "import os, sys; a = sys.argv[sys.argv.index('--') + 1:]; os.environ.update(zip(a[0::2], a[1::2]))";

function compileJob(job) {
    const s = job.settings;
    const chunks = frameChunker(s.frames, s.chunk_size);
    if (chunks.length === 0) {
        throw `no frames to render in "${s.frames}"`;
    }
    const env = engineEnvironment(s);

    const analyse = author.Task("analyse-shot", "blender");
    analyse.addCommand(blender(s, ["--python-expr", `${SETUP}; import bpy; bpy.ops.facefusion.farm_analyse()`], env));
    job.addTask(analyse);

    for (const chunk of chunks) {
        const task = author.Task(`render-${chunk}`, "blender");
        // Baked first in one engine session (Blender renders each frame as a render of its own, and the add-on lets
        // the engine go after each); the chunk holds only digits, "-" and ",".
        const bakeChunk = `${SETUP}; import bpy; bpy.ops.facefusion.farm_bake(frames='${chunk}')`;
        task.addCommand(blender(s, ["--python-expr", bakeChunk, "--render-frame", chunk.replaceAll("-", "..")], env));
        task.addDependency(analyse);
        job.addTask(task);
    }
}

// A Python error (the analysis failing, the setup) ends Blender with status 1 instead of 0, so the task fails.
function blender(s, args, env) {
    const scene = s.scene ? ["--scene", s.scene] : [];
    return author.Command("blender-render", {
        exe: "{blender}",
        exeArgs: "{blenderArgs}",
        argsBefore: [],
        blendfile: s.blendfile,
        args: scene.concat(["--python-exit-code", "1"], args, ["--"], env),
    });
}

function engineEnvironment(s) {
    const analyses = path.join(path.dirname(s.render_output), "face-fusion-analysis");
    const env = ["FACE_FUSION_FARM_ANALYSIS", analyses, "FACE_FUSION_ENGINE_PYTHON", s.engine_python,
                 "FACE_FUSION_ENGINE_ROOT", s.engine_root];
    const optional = [["FACE_FUSION_MODELS_DIR", s.models_dir], ["FACE_FUSION_CONSENT_FILE", s.consent_file]];
    for (const pair of optional) {
        if (pair[1]) {
            env.push(pair[0], pair[1]);
        }
    }
    return env;
}
