/**
 * A REST route that changes a note: the note's listen subscribers get
 * `notifications/resources/updated` (NotesService publishes through the hub).
 */
import { BadRequestException, Body, Controller, Inject, Param, Put, Req } from '@nestjs/common';
import { principalOf, type AuthedRequest } from './auth.guard';
import { NOTE_NAME, NotesService } from './notes.service';

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
