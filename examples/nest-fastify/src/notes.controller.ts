import { BadRequestException, Body, Controller, Inject, Param, Put, Req } from '@nestjs/common';
import type { AuthedRequest } from './auth.guard.ts';
import { NOTE_NAME, NotesService, principalOf } from './notes.ts';

/** A REST route that changes a note: the note's listeners get notifications/resources/updated. */
@Controller('notes')
export class NotesController {
  constructor(@Inject(NotesService) private readonly notes: NotesService) {}

  @Put(':name')
  save(@Req() req: AuthedRequest, @Param('name') name: string, @Body('text') text: unknown): { uri: string } {
    const owner = principalOf(req.auth);
    if (owner === undefined || !NOTE_NAME.test(name) || typeof text !== 'string') {
      throw new BadRequestException('expected PUT /notes/<name> with {"text": "..."}');
    }
    return { uri: this.notes.save(owner, name, text) };
  }
}
